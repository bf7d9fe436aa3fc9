"""Version constants in code: decode what a well-known version getter returns, statically.

A getter such as ``ncclGetVersion(int *v)`` or ``cudnnGetVersion(void)`` compiles to code
that stores or returns a constant. This module finds the function through ``.dynsym`` or
``.symtab`` (pyelftools), checks that the symbol lies inside an executable ``PROGBITS``
section of an x86-64 ELF file, and decodes its first instructions with Capstone. Nothing is
executed: the decoder follows the data flow of the out-parameter register by pattern, with
hard bounds.

What real getters look like (x86-64, from the pinned artifacts the snippet tests use; see
``docs/version-getters.md`` for the per-release notes):

* ``ncclGetVersion`` (NCCL 2.19.3, 2.21.5, 2.30.7): a leaf. ``test rdi,rdi; je; mov dword
  [rdi], 0x558f; xor eax,eax; ret`` -- the ``NCCL_VERSION_CODE`` (21903).
* ``cudaRuntimeGetVersion`` (cudart 12.1.105, 12.4.127, 13.0.96, and the static cudart an
  nvcc 13.0 executable carries): a traced wrapper keeping the out-parameter in a callee-saved
  register (``mov r12, rdi``) and calling, through ``mov rdi, r12; call``, a leaf of the
  ``ncclGetVersion`` shape storing ``CUDART_VERSION`` (12010, 12040, 13000).
* ``cudnnGetVersion`` (cuDNN 9: ``libcudnn_graph.so.9``): a logging wrapper ending in ``mov
  eax, 0x168f0; ret`` (92400). The cuDNN 9 front library ``libcudnn.so.9`` only forwards the
  call through ``dlsym``: it holds no constant.
* ``cublasLtGetVersion`` (cuBLAS 12.9.3.13, 13.1.1.3): a leaf, ``mov eax, 0x1d847; ret``
  (120903). ``libcublas.so``'s ``cublasGetVersion_v2`` only calls it through the PLT.
* ``nppGetLibVersion`` (NPP 11.8.0.86, 12.2.5.30: ``libnppc_static.a`` linked into an
  executable or a shared library): ``lea rax, [rip + goVersion]; ret``, a pointer to a static
  ``NppLibraryVersion {int major, minor, build}`` in ``.data`` ({12, 2, 5}).

Decoding, per function, a linear sweep of at most :data:`MAX_FUNC_BYTES` from the symbol:

* ``kind="return"``: at each ``ret``, the last ``mov eax, imm32`` not overwritten since;
* ``kind="pointer"``: at each ``ret``, the address the last ``lea rax, [rip + disp]`` (or
  ``mov eax, imm32``) put in ``rax``; the words stored there are read from the section
  holding it;
* ``kind="out"``: ``mov dword [R], imm32`` where ``R`` still holds the first argument (``rdi``
  at entry, copied into other registers by ``mov``); a direct ``call`` or tail ``jmp``
  made while ``rdi`` holds it is followed (depth :data:`MAX_DEPTH`).

Every function entry is visited once (a jump loop ends), targets must lie in the same
executable section, at most :data:`MAX_INSNS` instructions are decoded per getter, and
anything undecodable ends the sweep of that function. The result lists every candidate
constant; the classifier row's version rule decides which is plausible.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, Literal

from gpusbom.binary.elf import BinaryFormatError

__all__ = [
    "MAX_DEPTH",
    "MAX_FUNC_BYTES",
    "MAX_INSNS",
    "Candidate",
    "GetterResult",
    "read_getter",
]

#: Longest stretch of one function decoded (bytes from its entry).
MAX_FUNC_BYTES = 4096
#: Most instructions decoded for one getter, over all the functions followed.
MAX_INSNS = 4096
#: How many calls deep the out-parameter is followed.
MAX_DEPTH = 2
#: Largest symbol or string table read (bytes); a bigger one is not searched.
MAX_TABLE = 128 << 20

_EM_X86_64 = "EM_X86_64"
_SHF_EXECINSTR = 0x4
_CALLER_SAVED = {"rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"}
_CALLEE_SAVED = {"rbx", "rbp", "r12", "r13", "r14", "r15"}
# 32/16/8-bit names -> the 64-bit register they are part of
_REG64 = {
    **{r: r for r in ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp")},
    **{f"r{i}": f"r{i}" for i in range(8, 16)},
    **{f"r{i}d": f"r{i}" for i in range(8, 16)},
    **{f"r{i}w": f"r{i}" for i in range(8, 16)},
    **{f"r{i}b": f"r{i}" for i in range(8, 16)},
    "eax": "rax", "ax": "rax", "al": "rax", "ah": "rax",
    "ebx": "rbx", "bx": "rbx", "bl": "rbx", "bh": "rbx",
    "ecx": "rcx", "cx": "rcx", "cl": "rcx", "ch": "rcx",
    "edx": "rdx", "dx": "rdx", "dl": "rdx", "dh": "rdx",
    "esi": "rsi", "si": "rsi", "sil": "rsi",
    "edi": "rdi", "di": "rdi", "dil": "rdi",
    "ebp": "rbp", "bp": "rbp", "bpl": "rbp",
    "esp": "rsp", "sp": "rsp", "spl": "rsp",
}  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    """A constant the getter may give: ``value``, the instruction address and its text."""

    value: int
    address: int
    insn: str
    depth: int
    #: ``kind="pointer"``: the 32-bit signed words read where ``value`` points (``()`` when
    #: they could not be read: see the result's notes)
    words: tuple[int, ...] = ()


@dataclass(frozen=True)
class GetterResult:
    """What :func:`read_getter` found: the symbol's address and the candidate constants
    (in decode order), or ``error`` saying why nothing could be decoded."""

    symbol: str
    table: str | None = None
    address: int | None = None
    candidates: tuple[Candidate, ...] = ()
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _reg(name: str) -> str:
    return _REG64.get(name, name)


class _Code:
    """Bounded reads of one executable section."""

    def __init__(self, f: BinaryIO, addr: int, offset: int, size: int) -> None:
        self.f, self.addr, self.offset, self.size = f, addr, offset, size

    def contains(self, va: int) -> bool:
        return self.addr <= va < self.addr + self.size

    def read(self, va: int, n: int) -> bytes:
        n = min(n, self.addr + self.size - va)
        self.f.seek(self.offset + va - self.addr)
        return self.f.read(max(0, n))


def _find_symbol(
    elf: Any, f: BinaryIO, symbol: str, tables: tuple[str, ...] = (".dynsym", ".symtab")
) -> tuple[str, Any] | None:
    """The defined symbol ``symbol`` (or ``symbol@version``) of ``.dynsym``, else ``.symtab``.

    The name is found in the string table with ``bytes.find`` and its offset then in the
    symbol table's ``st_name`` fields (every 24 bytes): no Python loop over the symbols (a
    framework library's ``.symtab`` holds millions)."""
    import struct

    for table in tables:
        sec = elf.get_section_by_name(table)
        if sec is None or int(sec["sh_entsize"]) != 24:
            continue
        strsec = elf.get_section(int(sec["sh_link"]))
        str_off, str_size = int(strsec["sh_offset"]), int(strsec["sh_size"])
        sym_off, sym_size = int(sec["sh_offset"]), int(sec["sh_size"])
        if str_size > MAX_TABLE or sym_size > MAX_TABLE:
            continue
        f.seek(str_off)
        strtab = f.read(str_size)
        f.seek(sym_off)
        symtab = f.read(sym_size)
        want = symbol.encode()
        names: list[int] = []
        for end in (b"\0", b"@"):
            # not anchored at a NUL: linkers share tails (``ncclGetVersion`` in
            # ``pncclGetVersion``); a longer name's tail is told apart by st_name
            at = strtab.find(want + end)
            while at >= 0 and len(names) < 64:
                names.append(at)
                at = strtab.find(want + end, at + 1)
        for name_off in names:
            key = struct.pack("<I", name_off)
            at = symtab.find(key)
            while at >= 0:
                if at % 24 == 0:
                    _, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", symtab, at)
                    if shndx != 0 and info & 0xF in (0, 2):  # NOTYPE or FUNC, defined
                        return table, {
                            "st_shndx": shndx, "st_value": value, "st_size": size,
                        }
                at = symtab.find(key, at + 1)
    return None


def read_getter(
    f: BinaryIO,
    symbol: str,
    *,
    kind: Literal["return", "out", "out1", "pointer"],
    name: str = "<binary>",
    tables: tuple[str, ...] = (".dynsym", ".symtab"),
    words: int = 3,
) -> GetterResult:
    """Decode the constant(s) the function ``symbol`` of the ELF file ``f`` returns
    (``kind="return"``) or stores through its first argument (``kind="out"``) or its second
    (``kind="out1"``: ``cublasGetVersion_v2(handle, &version)``).

    ``tables``: the symbol tables searched, in order (a static CUDA runtime is looked for
    in ``.symtab`` only: a ``.dynsym`` definition is a shared ``libcudart`` itself).
    Never raises for bad input: problems are in ``error``. I/O errors propagate.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(f)
        if elf["e_machine"] != _EM_X86_64:
            return GetterResult(symbol, error=f"{name}: not x86-64 ({elf['e_machine']})")
        found = _find_symbol(elf, f, symbol, tables)
        if found is None:
            return GetterResult(symbol, error=f"{name}: no symbol {symbol}")
        table, sym = found
        shndx = sym["st_shndx"]
        if not 0 < shndx < min(elf.num_sections(), 0xFF00):
            return GetterResult(symbol, table, error=f"{name}: {symbol} has no section")
        sec = elf.get_section(shndx)
        addr, size, off = int(sec["sh_addr"]), int(sec["sh_size"]), int(sec["sh_offset"])
        value = int(sym["st_value"])
        if sec["sh_type"] != "SHT_PROGBITS" or not int(sec["sh_flags"]) & _SHF_EXECINSTR:
            return GetterResult(
                symbol, table, value, error=f"{name}: {symbol} is not in an executable section"
            )
        f.seek(0, 2)
        fsize = f.tell()
        if off + size > fsize:
            return GetterResult(symbol, table, value, error=f"{name}: section runs past the file")
        code = _Code(f, addr, off, size)
        if not code.contains(value):
            return GetterResult(
                symbol,
                table,
                value,
                error=f"{name}: {symbol} at {value:#x} lies outside its section "
                f"{sec.name} [{addr:#x}, {addr + size:#x})",
            )
    except (ELFError, ValueError, KeyError, IndexError, OverflowError, EOFError) as exc:
        return GetterResult(symbol, error=f"{name}: malformed ELF: {exc}")
    except Exception as exc:  # noqa: BLE001 - construct's own errors on truncated structures; others re-raised
        if type(exc).__module__.split(".")[0] in ("construct", "elftools"):
            return GetterResult(symbol, error=f"{name}: malformed ELF: {exc}")
        raise
    dec = _Decoder(code, kind)
    size_hint = int(sym["st_size"] or 0)
    limit = min(size_hint, MAX_FUNC_BYTES) if size_hint > 0 else MAX_FUNC_BYTES
    dec.function(value, {dec.arg} if dec.arg else set(), 0, limit)
    cands = tuple(dec.found)
    if kind == "pointer":
        cands = tuple(_pointed(elf, f, fsize, c, words, dec.notes) for c in cands)
    return GetterResult(symbol, table, value, cands, None, tuple(dec.notes))


#: the most words a ``pointer`` getter's target is read for
MAX_WORDS = 16
_SHF_ALLOC = 0x2


def _pointed(
    elf: Any, f: BinaryIO, fsize: int, cand: Candidate, words: int, notes: list[str]
) -> Candidate:
    """``cand`` with the ``words`` little-endian int32 values stored at its address, read
    from the allocated ``PROGBITS`` section that holds all of them; unchanged (no words, a
    note saying why) when no section does, the section is ``NOBITS`` (``.bss``: zero until
    the program runs) or the bytes are not there (a sparse capture's hole)."""
    import struct

    n = max(1, min(words, MAX_WORDS)) * 4
    va = cand.value
    try:
        sections = list(elf.iter_sections())
    except Exception as exc:  # noqa: BLE001 - a malformed section table: no words
        notes.append(f"{va:#x}: section table unreadable ({exc})")
        return cand
    for sec in sections:
        addr, size = int(sec["sh_addr"]), int(sec["sh_size"])
        if not int(sec["sh_flags"]) & _SHF_ALLOC or not addr <= va < addr + size:
            continue
        if sec["sh_type"] == "SHT_NOBITS":
            notes.append(f"{va:#x} lies in {sec.name} (NOBITS: set at run time)")
            return cand
        if sec["sh_type"] != "SHT_PROGBITS" or va + n > addr + size:
            notes.append(f"{va:#x}: {n} bytes do not fit in {sec.name}")
            return cand
        off = int(sec["sh_offset"]) + va - addr
        if off + n > fsize:
            notes.append(f"{va:#x}: file offset {off:#x} past the file")
            return cand
        f.seek(off)
        data = f.read(n)
        if len(data) != n:
            notes.append(f"{va:#x}: bytes at {off:#x} not available")
            return cand
        return replace(cand, words=struct.unpack(f"<{n // 4}i", data))
    notes.append(f"{va:#x} lies in no allocated section")
    return cand


class _Decoder:
    def __init__(self, code: _Code, kind: str) -> None:
        import capstone  # type: ignore[import-untyped]

        self.cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        self.cs.detail = True
        self.code, self.kind = code, kind
        #: the register of the out-parameter: ``out`` the first argument, ``out1`` the second
        self.arg = {"out": "rdi", "out1": "rsi"}.get(kind)
        #: ``pointer`` getters: what ``rax`` holds at ``ret`` is an address (``lea rax,
        #: [rip + disp]``, or ``mov eax, imm32`` in non-PIC code)
        self.returns = kind in ("return", "pointer")
        self.budget = MAX_INSNS
        self.seen: set[int] = set()
        self.found: list[Candidate] = []
        self.notes: list[str] = []

    def function(
        self, entry: int, holders: set[str], depth: int, limit: int = MAX_FUNC_BYTES
    ) -> None:
        """Sweep one function from ``entry``; ``holders``: registers holding argument 0."""
        from capstone import x86

        if entry in self.seen or not self.code.contains(entry):
            return
        self.seen.add(entry)
        data = self.code.read(entry, limit)
        eax: int | None = None
        eax_insn: Any = None
        end = entry
        for insn in self.cs.disasm(data, entry):
            if self.arg and not holders:
                # no register holds the out-parameter any more and none can again (only a
                # copy from a holder makes one): the rest of this sweep finds nothing and
                # follows no call. It is only counted (the budget, the notes), undetailed:
                # the detailed decode was most of a getter's time (cudart's leaf is followed
                # by 4 KiB of other functions)
                self._count_rest(data, entry, insn.address)
                return
            end = insn.address + insn.size
            if self.budget <= 0:
                self.notes.append(f"instruction budget spent at {insn.address:#x}")
                return
            self.budget -= 1
            mn = insn.mnemonic
            if mn in ("ret", "retq"):
                if eax is not None and self.returns:
                    self._add(eax, eax_insn, depth)
                eax = None
                holders = holders & _CALLEE_SAVED
                continue
            # operands only where they are read: building them (capstone's detail, through
            # ctypes) was half the decoding time, and two instructions in three need none
            ops: list[Any]
            if mn in ("call", "jmp"):
                ops = insn.operands
                target = ops[0].imm if ops and ops[0].type == x86.X86_OP_IMM else None
                tail = mn == "jmp" and target is not None and not entry <= target < entry + len(data)
                if (mn == "call" or tail) and target is not None:
                    if self.arg and self.arg in holders and depth < MAX_DEPTH:
                        self.function(target, {self.arg}, depth + 1)
                    elif self.returns and tail and depth < MAX_DEPTH:
                        self.function(target, set(), depth + 1)
                if mn == "call":
                    holders = holders - _CALLER_SAVED
                    eax = None
                elif mn == "jmp":
                    eax = None
                    holders = holders & _CALLEE_SAVED
                continue
            if mn == "lea" and self.kind == "pointer":
                ops = insn.operands
                if len(ops) == 2 and ops[0].type == x86.X86_OP_REG and \
                        _reg(insn.reg_name(ops[0].reg)) == "rax" and ops[0].size == 8:
                    m = ops[1].mem
                    rip = m.base and insn.reg_name(m.base) == "rip" and not m.index
                    eax = (insn.address + insn.size + m.disp) & ((1 << 64) - 1) if rip else None
                    eax_insn = insn
                    holders = holders - {"rax"}
                    continue
            ops = insn.operands if mn == "mov" else []
            if mn == "mov" and len(ops) == 2:
                dst, src = ops
                if dst.type == x86.X86_OP_MEM and src.type == x86.X86_OP_IMM:
                    base = insn.reg_name(dst.mem.base) if dst.mem.base else None
                    if (
                        self.arg
                        and dst.size == 4
                        and base is not None
                        and _reg(base) in holders
                        and not dst.mem.index
                        and dst.mem.disp == 0
                    ):
                        self._add(src.imm & 0xFFFFFFFF, insn, depth)
                    continue
                if dst.type == x86.X86_OP_REG:
                    d = _reg(insn.reg_name(dst.reg))
                    if src.type == x86.X86_OP_REG and _reg(insn.reg_name(src.reg)) in holders:
                        holders = holders | {d}
                    else:
                        holders = holders - {d}
                    if d == "rax":
                        eax = src.imm & 0xFFFFFFFF if src.type == x86.X86_OP_IMM else None
                        eax_insn = insn
                    continue
            # any other write to a register ends what we knew about it
            try:
                _, written = insn.regs_access()
            except Exception:  # noqa: BLE001 - capstone cannot tell: assume everything
                written = []
                holders, eax = set(), None
            for r in written:
                rr = _reg(insn.reg_name(r))
                holders = holders - {rr}
                if rr == "rax":
                    eax = None
        if end < entry + len(data) and end < self.code.addr + self.code.size:
            self.notes.append(f"undecodable instruction at {end:#x}")

    def _count_rest(self, data: bytes, entry: int, at: int) -> None:
        """The rest of :meth:`function`'s sweep from ``at`` where it can find nothing: each
        instruction spends budget, as there, and the same notes are made. ``disasm_lite``
        decodes the same instructions without their details."""
        end = at
        for address, size, _, _ in self.cs.disasm_lite(data[at - entry :], at):
            end = address + size
            if self.budget <= 0:
                self.notes.append(f"instruction budget spent at {address:#x}")
                return
            self.budget -= 1
        if end < entry + len(data) and end < self.code.addr + self.code.size:
            self.notes.append(f"undecodable instruction at {end:#x}")

    def _add(self, value: int, insn: Any, depth: int) -> None:
        self.found.append(
            Candidate(value, insn.address, f"{insn.mnemonic} {insn.op_str}".strip(), depth)
        )


def decode_error(msg: str) -> BinaryFormatError:
    """The :class:`BinaryFormatError` a caller raises from a :class:`GetterResult` error."""
    return BinaryFormatError(msg)
