#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/npy_fuzz.cpp (tests/fuzz/corpus/npy/) with NumPy itself, so that the
reader is tested on files it did not write. The files are committed; rerun this only to change them:

    /usr/bin/python3 tests/fuzz/make_corpus.py      (Debian's python3-numpy)

good_*.npy hold arange(6) (bool: arange(6) % 2) as 2 x 3 or as 6, one per dtype, across byte orders, C and
Fortran order and format versions 1.0, 2.0 and 3.0 (npy_test's NpyLoad.ReadsTheFilesNumPyWrote checks them);
special_f2.npy holds fp16 edge values; bad_*.npy are inputs halfmap must refuse in one sentence.
"""
import io
import pathlib

import numpy as np
from numpy.lib import format as npformat

out = pathlib.Path(__file__).resolve().parent / "corpus" / "npy"
out.mkdir(parents=True, exist_ok=True)


def npy(arr, version=None):
    b = io.BytesIO()
    npformat.write_array(b, arr, version=version, allow_pickle=True)
    return b.getvalue()


def write(name, data):
    (out / name).write_bytes(data)


good = [  # (dtype, fortran, ndim, version)
    ("<f2", False, 2, None), (">f2", True, 2, None), ("<f4", True, 2, (3, 0)), (">f4", False, 1, None),
    ("<f8", False, 1, None), (">f8", False, 2, (2, 0)), ("|i1", False, 1, None), (">i2", False, 2, None),
    ("<i4", True, 2, None), (">i8", False, 1, None), ("|u1", False, 2, None), ("<u2", False, 1, (3, 0)),
    (">u4", True, 2, None), ("<u8", False, 2, None), ("|b1", False, 1, None), ("|b1", True, 2, (2, 0)),
]
for dtype, fortran, ndim, version in good:
    a = np.arange(6) % 2 if dtype == "|b1" else np.arange(6)
    a = a.astype(dtype)
    if ndim == 2:
        a = a.reshape(2, 3)
        if fortran:
            a = np.asfortranarray(a)
    order = {"<": "le", ">": "be", "|": "na"}[dtype[0]]
    v = f"_v{version[0]}" if version else ""
    write(f"good_{dtype[1:]}_{order}_{'F' if fortran else 'C'}_{ndim}d{v}.npy", npy(a, version))

write("special_f2.npy", npy(np.array([2.0**-24, 1023 * 2.0**-24, 65504, np.inf, -np.inf, np.nan, -0.0, 0.1],
                                     dtype="<f2")))

f8 = npy(np.arange(3, dtype="<f8"))
write("bad_truncated_data.npy", f8[:-5])
write("bad_extra_data.npy", f8 + npy(np.arange(1, dtype="<f8")))
write("bad_truncated_header.npy", f8[:40])
write("bad_complex.npy", npy(np.arange(2, dtype="<c8")))
write("bad_object_pickle.npy", npy(np.array([1, "a"], dtype=object)))
write("bad_3d.npy", npy(np.zeros((1, 2, 2), dtype="<f4")))
write("bad_0d.npy", npy(np.float64(1.5)))
write("bad_empty.npy", npy(np.zeros((0, 3), dtype="<f8")))
write("bad_structured.npy", npy(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")])))
write("bad_unicode.npy", npy(np.array(["ab"], dtype="<U2")))
z = io.BytesIO()
np.savez(z, a=np.arange(1, dtype="<f8"))
write("bad_npz.npy", z.getvalue())


def hand(dict_text, data=b"", major=1):
    """A header NumPy would not write, padded the way it pads."""
    prefix = 10 if major == 1 else 12
    h = dict_text + " " * ((-(prefix + len(dict_text) + 1)) % 64) + "\n"
    n = len(h).to_bytes(prefix - 8, "little")
    return b"\x93NUMPY" + bytes([major, 0]) + n + h.encode() + data


write("bad_overflow_shape.npy", hand("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"))
write("bad_negative_dim.npy", hand("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"))
write("bad_newline_only_header.npy", b"\x93NUMPY\x01\x00\x01\x00\n")
write("bad_header_len_beyond_file.npy", f8[:8] + b"\xff\xff" + f8[10:])
write("good_hand_keys_reordered.npy",
      hand("{\"shape\":(2,3,),'descr':'<i2' , 'fortran_order':False}", np.arange(6, dtype="<i2").tobytes()))
