# evalgrid's result hand-back (POSIX sh, as the command's uid, in /workspace): one header line
# `EVALGRID-COLLECT <present|missing|invalid> <reason>` on stderr, then at most cap + 1 bytes
# of the file (evalgrid rejects more than cap). No symlink in any component, a regular file.
# Arguments: dd, result path, byte cap, the command's exit status (this script's own).
dd=$1 path=$2 cap=$3 status=$4
found() {
    printf 'EVALGRID-COLLECT %s %s\n' "$1" "$2" >&2
}
case "/$path/" in
    *//* | */./* | */../*)
        found invalid "bad predictions path $path"
        exit "$status"
        ;;
esac
seen= rest=$path
while :; do
    name=${rest%%/*}
    seen=${seen:+$seen/}$name
    if [ -L "$seen" ]; then
        found invalid "$seen is a symlink"
        exit "$status"
    fi
    if [ ! -e "$seen" ]; then
        found missing ""
        exit "$status"
    fi
    [ "$rest" = "$name" ] && break
    if [ ! -d "$seen" ]; then
        found missing ""
        exit "$status"
    fi
    rest=${rest#*/}
done
if [ ! -f "$path" ]; then
    found invalid "$path is not a regular file"
    exit "$status"
fi
if [ ! -r "$path" ]; then
    found invalid "cannot open $path: Permission denied"
    exit "$status"
fi
found present ""
# nofollow, nonblock: a file swapped for a symlink or a FIFO since the checks is not followed
# nor waited on; dd's own complaints stay out of the channel.
"$dd" if="$path" iflag=nofollow,nonblock,count_bytes count=$((cap + 1)) bs=65536 status=none >&2 2>/dev/null
exit "$status"
