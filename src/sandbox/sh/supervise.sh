# evalgrid's supervisor inside bubblewrap (POSIX sh; the sandbox's root with only CAP_SETUID
# and CAP_SETGID, or the caller inside a user namespace). It runs the command with its stderr
# joined to its stdout, then hands the result file back on its own stderr (a separate pipe
# to evalgrid) through collect.sh, run as the command's uid, and exits with the command's
# status (128 + signal when it was killed). The shell replaces a second Python interpreter.
# Arguments: sh, setpriv, uid and gid to read as ('' = keep ours), collect.sh's text, dd,
# result path (relative to /workspace), byte cap, then the command (prlimit ... setpriv ...
# python ...). The environment is the command's own (bubblewrap set it); dash's PWD is not.
unset PWD
sh=$1 setpriv=$2 uid=$3 gid=$4 collect=$5 dd=$6 path=$7 cap=$8
shift 8
# The collect pipe waits on fd 3: the shell's own notes ("Killed", "CPU time limit exceeded")
# go nowhere, as with the launcher; the command's stderr joins its stdout, without fd 3.
exec 3>&2 2>/dev/null
(exec 2>&1 3>&-; exec "$@")
status=$?
exec 2>&3 3>&-
if [ -n "$uid" ]; then
    # Only now (the command has exited) become its uid, to read its file as it could.
    exec "$setpriv" --reuid="$uid" --regid="$gid" --clear-groups -- "$sh" -c "$collect" collect "$dd" "$path" "$cap" "$status"
fi
exec "$sh" -c "$collect" collect "$dd" "$path" "$cap" "$status"
