"""How full each page of a PDF that Chromium printed is, read from its content streams (no PDF library here).

Chromium (Skia) writes each page as one Flate stream: a clip rectangle, the page's printable area, then the
document drawn under a transform that moves it up by the page's offset. The ink of a page is where its text is
set (every `Tm` mapped through the current transform, `q`/`Q` and `cm` followed): a drawing's labels mark it,
and a filled path is not counted, since a white background can be as large as the page. A page's fill is how far down the
printable area its lowest ink reaches, from 0 (blank) to 1.
"""

from __future__ import annotations

import re
import zlib

_OBJ = re.compile(rb"\n(\d+) 0 obj\n")
_PAGE = re.compile(rb"\n(\d+) 0 obj\n<</Type /Page\n")
_TOKEN = re.compile(rb"-?\d*\.?\d+(?:[eE]-?\d+)?|[A-Za-z*'\"]+|\[|\]|<[0-9A-Fa-f]*>|\((?:\\.|[^\\)])*\)|/\S+")


def _streams(data: bytes) -> list[bytes]:
    starts = {int(m.group(1)): m.end() for m in _OBJ.finditer(data)}
    out = []
    for m in _PAGE.finditer(data):
        body = data[m.end(): m.end() + 4000]
        n = int(re.search(rb"/Contents (\d+) 0 R", body).group(1))
        at = starts[n]
        length = int(re.search(rb"/Length (\d+)", data[at: at + 200]).group(1))
        s0 = data.index(b"stream\n", at) + len(b"stream\n")
        out.append(zlib.decompress(data[s0: s0 + length]))
    return out


def _mul(m, n):
    a, b, c, d, e, f = m
    A, B, C, D, E, F = n
    return (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F)


def page_fills(data: bytes) -> list[float]:
    """Each page's fill: the lowest ink's depth into the printable area, as a fraction of its height."""
    fills = []
    for stream in _streams(data):
        ctm, stack, nums = (1, 0, 0, 1, 0, 0), [], []
        clip = None  # the first rectangle clipped to: the printable area, in the coordinates under the page scale
        lowest = None
        for tok in _TOKEN.findall(stream):
            if re.fullmatch(rb"-?\d*\.?\d+(?:[eE]-?\d+)?", tok):
                nums.append(float(tok))
                continue
            op = tok
            if op == b"q":
                stack.append(ctm)
            elif op == b"Q":
                ctm = stack.pop() if stack else ctm
            elif op == b"cm" and len(nums) >= 6:
                ctm = _mul(tuple(nums[-6:]), ctm)
            elif op == b"re" and len(nums) >= 4 and clip is None and len(stack) == 1:
                x, y, w, h = nums[-4:]
                clip = (y, y + h)
            # text is the ink: a filled path may be a white background as large as the page
            points = [tuple(nums[-2:])] if op == b"Tm" and len(nums) >= 6 else []
            for x, y in points:
                # under the page's own scale (the stream's first cm): the clip rectangle's coordinates
                a, b, c, d, e, f = ctm
                yy = b * x + d * y + f
                page = stack[0] if stack else ctm
                yy = (yy - page[5]) / page[3] if page[3] else yy
                if clip and clip[0] <= yy <= clip[1]:
                    lowest = yy if lowest is None else max(lowest, yy)
            nums = []
        if clip is None or lowest is None:
            fills.append(0.0)
        else:
            fills.append((lowest - clip[0]) / (clip[1] - clip[0]))
    return fills
