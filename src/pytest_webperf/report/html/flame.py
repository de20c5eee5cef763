"""The HTML report's differential flame graph: B's stacks, each frame as wide as its
share of B's samples (a counted profile: of its instructions), coloured by its change per
request against A (red: more, blue: less, white: the same), as inline SVG.

Root at the top (an icicle): every row is one depth of the stacks. Each frame's figure
per request is its samples on that path divided by the side's requests, so A and B
compare even when they served different numbers of requests; the colour scale is the
largest change on the graph. A path A had and B has not is not drawn (B's stacks are
the graph), but it counts in its parents' change. Frames too narrow to see are left out,
and so are rows beyond ``MAX_DEPTH``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from pytest_webperf.profiling.stacks import parse_folded

WIDTH = 1000.0
ROW = 16
MAX_DEPTH = 48
MIN_WIDTH = 0.5  # px: narrower frames are not drawn


@dataclass
class _Node:
    name: str
    b: int = 0  # B's samples on this path (the frame and what it calls)
    a: int = 0
    children: dict[str, _Node] = field(default_factory=dict)

    def child(self, name: str) -> _Node:
        found = self.children.get(name)
        if found is None:
            found = self.children[name] = _Node(name)
        return found


def _tree(base: Mapping[str, int], change: Mapping[str, int]) -> _Node:
    root = _Node("all")
    for stacks, side in ((change, "b"), (base, "a")):
        for stack, count in stacks.items():
            node = root
            setattr(node, side, getattr(node, side) + count)
            for frame in stack.split(";"):
                node = node.child(frame)
                setattr(node, side, getattr(node, side) + count)
    return root


def _fill(delta: float, scale: float) -> str:
    """White at no change, red up to ``scale`` more, blue up to ``scale`` less."""
    k = min(1.0, abs(delta) / scale) if scale > 0 else 0.0
    fade = round(255 - 200 * k)
    return f"rgb(255,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},255)"


def flame_graph(
    base_folded: str,
    change_folded: str,
    requests_a: int,
    requests_b: int,
    *,
    instructions: bool = False,
) -> Markup | None:
    """The graph, or None when there is nothing to draw (no B samples, no requests).
    ``instructions``: the stacks count instructions (a counted profile), shown per
    request, not samples per 1000 requests."""
    try:
        base, change = parse_folded(base_folded), parse_folded(change_folded)
    except ValueError:
        return None
    if requests_a <= 0 or requests_b <= 0 or not change:
        return None
    root = _tree(base, change)
    scale_to = 1 if instructions else 1000  # instructions per request, samples per 1000
    per_b, per_a = scale_to / requests_b, scale_to / requests_a
    unit = "instructions per request" if instructions else "samples per 1000 requests"

    def delta(node: _Node) -> float:
        return node.b * per_b - node.a * per_a

    scale = 0.0
    boxes: list[tuple[_Node, float, float, int]] = []  # node, x, width, depth
    todo = [(root, 0.0, WIDTH, 0)]
    while todo:
        node, x, width, depth = todo.pop()
        boxes.append((node, x, width, depth))
        scale = max(scale, abs(delta(node)))
        if depth + 1 >= MAX_DEPTH:
            continue
        offset = x
        for child in sorted(node.children.values(), key=lambda n: n.name):
            if child.b == 0:
                continue
            w = width * child.b / node.b
            if w >= MIN_WIDTH:
                todo.append((child, offset, w, depth + 1))
            offset += w
    height = (max(d for _, _, _, d in boxes) + 1) * ROW
    parts = [
        f'<svg class="flame" viewBox="0 0 {WIDTH:g} {height}" width="100%" '
        f'role="img" aria-label="differential flame graph" font-size="11">'
    ]
    for node, x, width, depth in boxes:
        b_k, a_k = node.b * per_b, node.a * per_a
        title = f"{node.name}: B {b_k:,.2f}, A {a_k:,.2f} {unit} ({b_k - a_k:+,.2f})"
        y = depth * ROW
        parts.append(
            f'<g><title>{escape(title)}</title><rect x="{x:.1f}" y="{y}" width="{width:.1f}" '
            f'height="{ROW - 1}" fill="{_fill(delta(node), scale)}" stroke="#999" '
            'stroke-width="0.3"/>'
        )
        chars = int(width / 6.5)
        if chars >= 4:
            label = node.name if len(node.name) <= chars else node.name[: chars - 1] + "…"
            parts.append(f'<text x="{x + 2:.1f}" y="{y + ROW - 4}">{escape(label)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
