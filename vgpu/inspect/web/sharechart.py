"""Each queue's share over time, drawn from the view's own samples since it started: after every
good read the refresh loop keeps each queue's share (held over deserved, as `--queues` prints
it), at most `SAMPLES_KEPT` reads back. Pure: samples -> an inline SVG (no script, no style
attribute), one line per queue over a dashed line at 1.0 (a queue holding what it deserves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu.inspect.web.html import esc

SAMPLES_KEPT = 720
"""One hour at the default refresh of 5 s."""

Sample = tuple[float, Mapping[str, float]]
"""When (seconds since the epoch), and each queue's share then."""

COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#b00020", "#00838f", "#5d4037")
WIDTH, HEIGHT, PAD = 640, 200, 30


def share_chart(samples: Sequence[Sample]) -> str:
    """The chart, or a line saying there is nothing to draw yet."""
    queues = sorted({q for _, shares in samples for q in shares})
    if len(samples) < 2 or not queues:
        return "<p>The share-over-time chart starts after two reads with queues configured.</p>"
    t0, t1 = samples[0][0], samples[-1][0]
    top = max(1.0, *(v for _, s in samples for v in s.values()))

    def x(t: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * v / top

    lines, legend = [], []
    for i, q in enumerate(queues):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{x(t):.1f},{y(s[q]):.1f}" for t, s in samples if q in s)
        lines.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{esc(q)}</title></polyline>"
        )
        legend.append(f'<text x="{WIDTH - PAD}" y="{PAD + 14 * i}" text-anchor="end" '
                      f'fill="{colour}">{esc(q)} {samples[-1][1].get(q, 0):.2f}</text>')  # fmt: skip
    minutes = (t1 - t0) / 60
    return (
        f'<svg id="share-chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'role="img" aria-labelledby="share-chart-t"><title id="share-chart-t">Each queue\'s '
        f"share over the last {minutes:.1f} minutes (1.0: what it deserves)</title>"
        f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" '
        'stroke="#757575" stroke-dasharray="4 4"/>'
        f'<text x="{PAD}" y="{y(1.0) - 4:.1f}" fill="#424242">1.0</text>'
        f'<text x="{PAD}" y="{HEIGHT - 8}" fill="#424242">{minutes:.1f} min ago</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" text-anchor="end" fill="#424242">now</text>'
        + "".join(lines)
        + "".join(legend)
        + "</svg>"
    )
