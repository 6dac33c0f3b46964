#!/usr/bin/env bash
# Makes the base images Harbor task Dockerfiles start `FROM`, without an image registry:
# Debian packages from the apt mirror (mmdebstrap --variant=minbase), `podman import`ed and
# tagged with the names the Dockerfiles use. Idempotent: a tag that exists is left alone.
#
#   scripts/harbor-base-image.sh            # podman
#   RUNTIME=docker scripts/harbor-base-image.sh
#   MIRROR=http://my-mirror/debian scripts/harbor-base-image.sh
#
# What each tag really holds (see docs/agents.md, "Offline images"):
#   debian:bookworm-slim debian:bookworm debian:12 python:3.11-slim python:3.11-slim-bookworm
#   python:3.11          Debian 12 minbase + bash, coreutils, python3 (3.11), pip, `python`,
#                        ca-certificates with this host's CA bundle added.
#   debian:trixie-slim debian:trixie debian:13 python:3.13-slim python:3.13-slim-trixie
#   python:3.13 python:3.13-slim-bookworm
#                        Debian 13 minbase + the same, python3 3.13, and uv/uvx in
#                        /root/.local/bin with the installer's `env` file (what Terminal-Bench
#                        2.0's `uvx -p 3.13 … pytest` verifiers expect). The last tag is a
#                        stand-in: its content is Debian 13, not 12.
# Needs root (or a working `mmdebstrap --mode=unshare`), mmdebstrap, and pip for the uv wheel.
set -euo pipefail

RUNTIME=${RUNTIME:-podman}
MIRROR=${MIRROR:-$( (grep -hoE '^URIs: *http[^ ]*/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null || true) | head -1 | sed 's/^URIs: *//')}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
HOST_CA=${HOST_CA:-/etc/ssl/certs/ca-certificates.crt}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/harbor-base.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

have() { "$RUNTIME" image inspect "$1" >/dev/null 2>&1; }

# `python:3.13-slim` → `docker.io/library/python:3.13-slim`: the name a Dockerfile's short
# `FROM` resolves to, and the one a fully qualified `FROM` names.
qualified() { case "$1" in */*) echo "$1" ;; *) echo "docker.io/library/$1" ;; esac; }

# Tags of one image: the first that exists is tagged with the others; none: build it.
# make_image SUITE EXTRA_PACKAGES WITH_UV TAG...
make_image() {
  local suite=$1 extra=$2 with_uv=$3
  shift 3
  local missing=() present=""
  local names=()
  for t in "$@"; do names+=("$(qualified "$t")"); done
  set -- "${names[@]}"
  for t in "$@"; do
    if have "$t"; then present=${present:-$t}; else missing+=("$t"); fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "harbor-base-image: $* present"
    return 0
  fi
  if [ -z "$present" ]; then
    local start=$SECONDS tar="$WORK/$suite.tar"
    local hooks=(
      # This machine's CA bundle (its egress may re-sign TLS) joins the image's own, and
      # stays when ca-certificates is reconfigured inside a build.
      --customize-hook="mkdir -p \"\$1/usr/local/share/ca-certificates\" && cp '$HOST_CA' \"\$1/usr/local/share/ca-certificates/evalgrid-host-bundle.crt\""
      --customize-hook='chroot "$1" update-ca-certificates >/dev/null'
      # Like the python images: `pip install` works system-wide.
      --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED'
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin'
    )
    if [ "$with_uv" = 1 ]; then
      python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 --python-version 3.13 -d "$WORK/uv" uv
      python3 - "$WORK/uv" <<'PY'
import sys, zipfile, pathlib
d = pathlib.Path(sys.argv[1]); whl = next(d.glob("uv-*.whl")); out = d / "bin"; out.mkdir()
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if ".data/scripts/" in n and n.rsplit("/", 1)[1] in ("uv", "uvx"):
            p = out / n.rsplit("/", 1)[1]; p.write_bytes(z.read(n)); p.chmod(0o755)
PY
      cat > "$WORK/uv/bin/env" <<'ENV'
#!/bin/sh
# add binaries to PATH if they aren't added yet
# affix colons on either side of $PATH to simplify matching
case ":${PATH}:" in
    *:"$HOME/.local/bin":*)
        ;;
    *)
        # Prepending path in case a system-installed binary needs to be overridden
        export PATH="$HOME/.local/bin:$PATH"
        ;;
esac
ENV
      hooks+=(--customize-hook="mkdir -p \"\$1/root/.local/bin\" && cp -a '$WORK/uv/bin/.' \"\$1/root/.local/bin/\"")
    fi
    echo "harbor-base-image: building $suite from $MIRROR"
    mmdebstrap --quiet --variant=minbase --include="bash,coreutils,ca-certificates,python3,python3-pip,python-is-python3${extra:+,$extra}" \
      "${hooks[@]}" "$suite" "$tar" "$MIRROR"
    local quiet=()
    [ "$RUNTIME" = podman ] && quiet=(--quiet)
    "$RUNTIME" import "${quiet[@]}" \
      --change 'ENV PATH=/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["bash"]' \
      "$tar" "${missing[0]}" >/dev/null
    rm -f "$tar"
    present=${missing[0]}
    missing=("${missing[@]:1}")
    echo "harbor-base-image: $suite built and imported in $((SECONDS - start)) s"
  fi
  for t in "${missing[@]}"; do
    "$RUNTIME" tag "$present" "$t"
  done
  echo "harbor-base-image: $* ready"
}

make_image bookworm "" 0 debian:bookworm-slim debian:bookworm debian:12 python:3.11-slim python:3.11-slim-bookworm python:3.11
make_image trixie "" 1 debian:trixie-slim debian:trixie debian:13 python:3.13-slim python:3.13-slim-trixie python:3.13 python:3.13-slim-bookworm
