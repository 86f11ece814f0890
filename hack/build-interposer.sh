#!/usr/bin/env bash
# Builds vgpu-core (libvgpu-core.so) and the DRA driver's CDI hook (vgpu-cdi-hook, from
# vgpu-core/hook/) with the machine's C compiler into DIR, and prints the hook's path, then the
# library's path as its last line. CI and the Dockerfile call exactly this.
#   hack/build-interposer.sh DIR            # release build (-O2)
#   hack/build-interposer.sh --sanitize DIR # AddressSanitizer + UndefinedBehaviorSanitizer
#   hack/build-interposer.sh --sanitize=undefined DIR  # UndefinedBehaviorSanitizer only: for
#       what ASan's runtime refuses by design (a dlopen with RTLD_DEEPBIND aborts under it)
# VGPU_SANITIZE=1 does the same as --sanitize; CC picks the compiler (default: cc).
set -euo pipefail
sanitize="${VGPU_SANITIZE:-0}"
case "${1:-}" in
    --sanitize) sanitize=1; shift ;;
    --sanitize=undefined) sanitize=undefined; shift ;;
esac
if [[ $# -ne 1 ]]; then
    echo "usage: $0 [--sanitize] DIR" >&2
    exit 2
fi
out="$1"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../vgpu-core/src" && pwd)"
mkdir -p "$out"
flags=(-std=gnu11 -Wall -Wextra -Werror -O2)
if [[ "$sanitize" == "1" ]]; then
    flags+=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
elif [[ "$sanitize" == "undefined" ]]; then
    flags+=(-fsanitize=undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
fi
"${CC:-cc}" "${flags[@]}" -o "$out/vgpu-cdi-hook" "$src/../hook/vgpu-cdi-hook.c"
echo "$(cd "$out" && pwd)/vgpu-cdi-hook"
"${CC:-cc}" "${flags[@]}" -fPIC -shared -fvisibility=hidden -pthread \
    -Wl,-soname,libvgpu-core.so -Wl,--no-undefined \
    -o "$out/libvgpu-core.so" "$src"/*.c -ldl
echo "$(cd "$out" && pwd)/libvgpu-core.so"
