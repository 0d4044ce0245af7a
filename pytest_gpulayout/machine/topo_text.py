"""``nvidia-smi topo -m`` text, as people paste it, to a Machine and back.

The matrix is the one machine description everybody can produce without installing anything, and
it is what bug reports and chat threads carry. Pastes are messy: tabs turned into spaces, a shell
prompt or a ``GPU Topology:`` label above, indentation, colour codes (real ``ESC`` bytes or written
out as ``^[[0;36m``), NIC columns with cells glued together, legends wrapped over two lines, rows
cut off at the end. The parser reads only what the GPU columns say, tolerates everything around
them, and refuses (one line, naming the GPUs) whenever a link would have to be guessed.

What topo text does not say stays unknown: memory (``None``), GPU model (``""``), UUIDs. The host's
NUMA node of a GPU comes from the ``NUMA Affinity`` column when it is a single node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import strip_ansi
from pytest_gpulayout.machine.facts import Gpu, Machine, normalize_link

_GPU_LABEL_RE = re.compile(r"^GPU(\d+)$")
_NIC_LABEL_RE = re.compile(r"^(NIC\d+|mlx\S*|ib\S*|eth\S*|bnxt\S*|enp\S*)$", re.IGNORECASE)
_LABEL_PREFIX_RE = re.compile(r"^[^\t]*?:\s*(?=GPU0\b)")
# A cell past the GPU columns that is made of link words, possibly glued (``NODENODE``, ``NODEPXB``).
_LINKISH_RE = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NET)+$", re.IGNORECASE)
_NV_ZERO_RE = re.compile(r"^NV0+$", re.IGNORECASE)
_P2P_WORDS = {"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"}

#: The trailing per-GPU columns newer drivers print, in their order.
TAIL_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass(frozen=True)
class _Row:
    gpu: int
    cells: tuple[str, ...]  # link kinds, "X" on the diagonal
    numa: int | None
    line: int


def _header_gpus(line: str) -> list[int] | None:
    """GPU column numbers when ``line`` is the matrix header, else None.

    A header is ``GPU0 GPU1 ...`` (possibly after a ``label:``) followed by anything but a link
    cell; a data row ``GPU0  X  NV12 ...`` has a link cell right after its label.
    """
    text = _LABEL_PREFIX_RE.sub("", line.strip())
    tokens = text.split()
    if not tokens or tokens[0] != "GPU0":
        return None
    if len(tokens) > 1 and (tokens[1] == "X" or _is_link(tokens[1])):
        return None
    gpus: list[int] = []
    for tok in tokens:
        m = _GPU_LABEL_RE.match(tok)
        if not m:
            break
        gpus.append(int(m.group(1)))
    return gpus


def has_topo_matrix(text: str) -> bool:
    """Whether ``text`` holds a ``nvidia-smi topo -m`` header (to tell pasted topo text from YAML)."""
    return any(_header_gpus(line) for line in strip_ansi(text).splitlines())


def _is_link(tok: str) -> bool:
    try:
        normalize_link(tok)
    except ValueError:
        return False
    return True


def _numa(token: str | None) -> int | None:
    if token is None:
        return None
    return int(token) if token.isdigit() else None


def _parse_row(tokens: list[str], n: int, tail_cols: list[str], lineno: int, where: str) -> _Row:
    label = tokens[0]
    gpu = int(_GPU_LABEL_RE.match(label).group(1))  # type: ignore[union-attr]
    if gpu >= n:
        raise InputError(f"line {lineno}: row {label}, but the header has only GPU0..GPU{n - 1}", where=where)
    cells = tokens[1 : 1 + n]
    if len(cells) < n:
        raise InputError(
            f"line {lineno}: row {label} has {len(cells)} of the {n} GPU cells; paste the whole line",
            where=where,
        )
    norm: list[str] = []
    for col, cell in enumerate(cells):
        if col == gpu:
            if cell.upper() != "X":
                raise InputError(f"line {lineno}: {label}'s own cell should be X, not {cell!r}", where=where)
            norm.append("X")
            continue
        try:
            kind = normalize_link(cell)
        except ValueError as err:
            if _NV_ZERO_RE.match(cell):  # NV0: NVLink-shaped, but zero links is no link; say why
                raise InputError(f"line {lineno}: {label}-GPU{col}: {err}", where=where) from None
            hint = ""
            if cell.upper() in _P2P_WORDS:
                hint = " (this looks like `nvidia-smi topo -p2p` output; paste `nvidia-smi topo -m`)"
            raise InputError(
                f"line {lineno}: {label}-GPU{col}: {cell!r} is not a link kind (X, NV#, PIX, PXB, PHB, NODE, "
                f"SYS){hint}",
                where=where,
            ) from None
        norm.append(kind)
    # Past the GPU columns: NIC cells (link words, maybe glued), then the affinity columns.
    rest = tokens[1 + n :]
    k = 0
    while k < len(rest) and _LINKISH_RE.match(rest[k]):
        k += 1
    tail = rest[k:]
    values: dict[str, str] = {}
    if len(tail) >= len(tail_cols):
        values = dict(zip(tail_cols, tail[: len(tail_cols)], strict=True))
    elif tail:
        # An empty column (e.g. CPU Affinity under a restricted cpuset) vanished in the split;
        # the later columns are never empty, so align from the right.
        values = dict(zip(tail_cols[len(tail_cols) - len(tail) :], tail, strict=True))
    return _Row(gpu=gpu, cells=tuple(norm), numa=_numa(values.get("NUMA Affinity")), line=lineno)


def parse_topo(text: str, where: str = "<text>") -> Machine:
    """The Machine described by ``nvidia-smi topo -m`` output inside ``text``.

    Only the first matrix is read. Each pair's link comes from whichever of its two rows is present
    (the matrix is symmetric); rows that disagree, a pair neither row gives, a cell that is not a link
    kind, or no matrix at all raise ``InputError``. ``source`` is ``topo:<where>``.
    """
    lines = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    header_at = None
    gpu_cols: list[int] = []
    for no, line in enumerate(lines):
        cols = _header_gpus(line)
        if cols:
            header_at, gpu_cols = no, cols
            break
    if header_at is None:
        raise InputError(
            "no `nvidia-smi topo -m` matrix found (expected a header line starting with GPU0)", where=where
        )
    n = len(gpu_cols)
    if gpu_cols != list(range(n)):
        raise InputError(
            f"line {header_at + 1}: header columns are {' '.join(f'GPU{g}' for g in gpu_cols)}; "
            "expected GPU0, GPU1, ... in order",
            where=where,
        )
    header = lines[header_at]
    header_flat = " ".join(header.split())
    tail_cols = [c for c in TAIL_COLUMNS if c in header_flat]

    rows: dict[int, _Row] = {}
    for no in range(header_at + 1, len(lines)):
        tokens = lines[no].split()
        if not tokens:
            continue
        if _GPU_LABEL_RE.match(tokens[0]):
            row = _parse_row(tokens, n, tail_cols, no + 1, where)
            if row.gpu in rows:
                raise InputError(
                    f"line {no + 1}: row GPU{row.gpu} appears twice (also line {rows[row.gpu].line})",
                    where=where,
                )
            rows[row.gpu] = row
        elif _NIC_LABEL_RE.match(tokens[0]):
            continue  # NIC rows: not GPUs
        else:
            break  # the matrix ended (legend, blank-separated prose, the next section)
    if not rows:
        raise InputError("the `nvidia-smi topo -m` matrix has a header but no GPU rows", where=where)

    links: dict[tuple[int, int], str] = {}
    unknown: list[str] = []
    for i in range(n):
        for j in range(i + 1, n):
            a = rows[i].cells[j] if i in rows else None
            b = rows[j].cells[i] if j in rows else None
            if a is not None and b is not None and a != b:
                raise InputError(
                    f"the matrix is not symmetric: GPU{i}-GPU{j} is {a} in GPU{i}'s row "
                    f"(line {rows[i].line}) "
                    f"but {b} in GPU{j}'s row (line {rows[j].line})",
                    where=where,
                )
            kind = a if a is not None else b
            if kind is None:
                unknown.append(f"GPU{i}-GPU{j}")
            else:
                links[(i, j)] = kind
    if unknown:
        missing_rows = ", ".join(f"GPU{g}" for g in range(n) if g not in rows)
        raise InputError(
            f"the matrix is cut off: rows {missing_rows} are missing, so the links {', '.join(unknown)} are "
            "unknown; paste the whole `nvidia-smi topo -m` output",
            where=where,
        )
    gpus = tuple(Gpu(index=g, numa_node=rows[g].numa if g in rows else None) for g in range(n))
    return Machine(gpus=gpus, links=links, source=f"topo:{where}")


LEGEND = (
    "Legend: X = self, NV# = # bonded NVLinks (NVSwitch systems show it for every pair), "
    "PIX = at most one PCIe bridge, PXB = several PCIe bridges, PHB = through the PCIe host bridge (CPU), "
    "NODE = across host bridges in one NUMA node, SYS = across the CPU socket interconnect, "
    "NET = across hosts, ? = unknown"
)


def render_topo(machine: Machine) -> str:
    """The link matrix in ``nvidia-smi topo -m`` layout (tab separated, `` X `` on the diagonal).

    A ``NUMA Affinity`` column is added when any GPU's node is known. A pair the source did not
    give shows ``?`` (never a guess). ``parse_topo(render_topo(m))`` gives back the same links.
    """
    idx = list(machine.indices)
    numa_known = any(g.numa_node is not None for g in machine.gpus)
    head = [""] + [f"GPU{i}" for i in idx] + (["NUMA Affinity"] if numa_known else [])
    out = ["\t".join(head)]
    for g in machine.gpus:
        cells = [f"GPU{g.index}"]
        for j in idx:
            cells.append(" X " if j == g.index else (machine.link(g.index, j) or "?"))
        if numa_known:
            cells.append("N/A" if g.numa_node is None else str(g.numa_node))
        out.append("\t".join(cells))
    out.append("")
    out.append(LEGEND)
    return "\n".join(out) + "\n"
