#!/usr/bin/python3
"""Independent vectors for kvindex's invalid-UTF-8 policy (docs/architecture.md).

Python's own decoder is the oracle: bytes.decode("utf-8", "replace") replaces each maximal
ill-formed subpart with U+FFFD, the policy kvindex documents. Each vector is an input in hex, the
expected output in hex and the offset of the first ill-formed byte (-1 when valid). The inputs
are hand-picked edge cases (every boundary of the well-formed byte table) and seeded random byte
strings biased towards UTF-8 lead and continuation bytes. Prints utf8_vectors.json on stdout
(regenerate: scripts/regen-vectors.sh).
"""
import json
import random

CASES = [
    b"", b"plain ascii", b"nul\x00inside", "caf\u00e9 \u20ac \U0001F600".encode(),
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xdf\xbf", b"\xc2",
    b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80",
    b"\xee\x80", b"\xef\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xfe\xff",
    b"\xf0\x9f\x98", b"\xf0\x9f\x98A", b"\xe2\x82", b"\xe2\x82\xe2\x82\xac", b"a\xffb\xc3\xa9c",
    b"\xf1\x80\x80\xc0", b"\xe1\x80\x80\x80",
]


def vector(data):
    text = data.decode("utf-8", "replace").encode("utf-8")
    first = -1
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        first = e.start
    return {"in": data.hex(), "out": text.hex(), "first_invalid": first}


def main():
    rng = random.Random(20261201)
    alphabet = [0x41, 0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF]
    cases = list(CASES)
    for _ in range(300):
        cases.append(bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
    print(json.dumps({"vectors": [vector(c) for c in cases]}, indent=1))


if __name__ == "__main__":
    main()
