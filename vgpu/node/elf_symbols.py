"""Which functions a shared library exports, read from its ELF dynamic symbol table.

The agent checks an interposer before it mounts it into containers: a library that does not
export the CUDA driver calls it claims to hook enforces nothing while everything looks in place
(a Release build of HAMi-core exports only `dlsym`). The dynamic loader resolves preloaded
symbols from `.dynsym`, so that table is what counts. Only 64-bit little-endian ELF (x86-64,
aarch64: the nodes vgpu runs on) is read; every offset is bounds-checked, so a damaged or hostile
file gives `ElfError`, never a crash. Pure: works on bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from vgpu.core.errors import VgpuError

_SHT_DYNSYM = 11
_SHN_UNDEF = 0
_STB_GLOBAL, _STB_WEAK = 1, 2
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
MAX_SYMBOLS = 1 << 20

CUDA_HOOKS = ("cuMemAlloc_v2", "cuLaunchKernel", "cuMemGetInfo_v2")
"""Driver calls every CUDA interposer that limits memory and compute must export."""


class ElfError(VgpuError, ValueError):
    """Not a readable 64-bit little-endian ELF shared library; the message says why."""


def exported_functions(data: bytes) -> frozenset[str]:
    """Names of the functions `data` (an ELF shared library) defines and exports."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4:6] != b"\x02\x01":
        raise ElfError("not a 64-bit little-endian ELF file")
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        if shentsize != _SECTION.size:
            raise ElfError(f"section header size {shentsize}, expected {_SECTION.size}")
        sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        names: set[str] = set()
        for s in sections:
            if s[1] == _SHT_DYNSYM:
                names.update(_symbols(data, s, sections))
    except struct.error as e:
        raise ElfError(f"truncated ({e})") from None
    except OverflowError:  # a 64-bit offset of 2**63 or more: struct cannot even try it
        raise ElfError("an offset lies past any file") from None
    return frozenset(names)


def _symbols(
    data: bytes, section: tuple[int, ...], sections: list[tuple[int, ...]]
) -> Iterable[str]:
    offset, size, link, entsize = section[4], section[5], section[6], section[9]
    if entsize != _SYMBOL.size or link >= len(sections):
        raise ElfError("malformed .dynsym")
    strtab_offset, strtab_size = sections[link][4], sections[link][5]
    count = min(size // entsize, MAX_SYMBOLS)
    for n in range(count):
        name_at, info, _other, shndx, _value, _size = _SYMBOL.unpack_from(
            data, offset + n * entsize
        )
        if shndx == _SHN_UNDEF or info >> 4 not in (_STB_GLOBAL, _STB_WEAK):
            continue
        if info & 0xF not in (_STT_FUNC, _STT_GNU_IFUNC) or name_at >= strtab_size:
            continue
        start = strtab_offset + name_at
        end = data.find(b"\0", start, strtab_offset + strtab_size)
        if end < 0:
            raise ElfError("a symbol name runs past the string table")
        yield data[start:end].decode("ascii", "replace")


def missing_hooks(data: bytes, wanted: Iterable[str] = CUDA_HOOKS) -> list[str]:
    """The `wanted` functions the library does not export (empty: it has them all)."""
    exported = exported_functions(data)
    return [name for name in wanted if name not in exported]
