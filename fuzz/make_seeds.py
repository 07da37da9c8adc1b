#!/usr/bin/env python3
"""Writes the binary seed files of fuzz/corpus (tiny GGUF models, llama2.c checkpoints and tokenizer files).

The text seeds (JSON messages, OpenAI bodies, tokenizer texts) are written by hand; the binary ones come from
here so that they can be remade and changed: python3 fuzz/make_seeds.py. Every file is a few KB at most.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32_TENSOR, Q8_0_TENSOR = 0, 8


def gguf_string(text):
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q",
          I64: "<q", F64: "<d"}


def gguf_value(kind, value):
    if kind == STRING:
        return gguf_string(value)
    if kind == ARRAY:
        element, items = value
        body = struct.pack("<IQ", element, len(items))
        return body + b"".join(gguf_value(element, item) for item in items)
    return struct.pack(SCALAR[kind], value)


def gguf_file(metadata, tensors, alignment=32):
    """metadata: [(key, type, value)]; tensors: [(name, dims, type, bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, kind, value in metadata:
        out += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    offset = 0
    offsets = []
    for name, dims, kind, data in tensors:
        offsets.append(offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    for (name, dims, kind, data), at in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", kind, at)
    out += b"\0" * (-len(out) % alignment)
    for name, dims, kind, data in tensors:
        out += data + b"\0" * (-len(data) % alignment)
    return out


def f32_data(rng, count):
    return struct.pack("<%df" % count, *[rng.uniform(-1, 1) for _ in range(count)])


def q8_0_data(rng, rows, cols):
    blocks = b""
    for _ in range(rows * cols // 32):
        blocks += struct.pack("<e", 0.01) + bytes(rng.randrange(256) for _ in range(32))
    return blocks


def spm_vocabulary(count):
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in (0x20, 0x41, 0xC3, 0xA9)]
    words = ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "c", "\u2581the", "t", "h", "e"]
    tokens += words[: count - len(tokens)]
    kinds = [2, 3, 3] + [6] * 4 + [1] * (len(tokens) - 7)
    return [
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.scores", ARRAY, (F32, [-float(i) for i in range(len(tokens))])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, kinds)),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
    ], len(tokens)


def bpe_vocabulary():
    tokens = ["!", "a", "b", "c", "\u0120", "ab", "\u0120a", "\u0120ab", "<|endoftext|>", "<tool>"]
    merges = ["a b", "\u0120 a", "\u0120a b"]
    return [
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, "qwen2"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, [1] * 8 + [3, 4])),
        ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
        ("tokenizer.ggml.eos_token_id", U32, 8),
        ("tokenizer.chat_template", STRING, "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"),
    ], len(tokens)


def model(arch, dim, ffn, heads, kv_heads, vocab_metadata, vocab, quantized=False, seed=1):
    rng = random.Random(seed)
    head_dim = dim // heads
    kv_dim = head_dim * kv_heads
    metadata = [
        ("general.architecture", STRING, arch),
        ("general.name", STRING, "loom-fuzz-seed"),
        (arch + ".context_length", U32, 64),
        (arch + ".embedding_length", U32, dim),
        (arch + ".feed_forward_length", U32, ffn),
        (arch + ".block_count", U32, 1),
        (arch + ".attention.head_count", U32, heads),
        (arch + ".attention.head_count_kv", U32, kv_heads),
        (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-5),
        (arch + ".rope.freq_base", F32, 10000.0),
    ] + vocab_metadata

    def matrix(name, cols, rows):
        if quantized:
            return (name, [cols, rows], Q8_0_TENSOR, q8_0_data(rng, rows, cols))
        return (name, [cols, rows], F32_TENSOR, f32_data(rng, cols * rows))

    def vector(name, n):
        return (name, [n], F32_TENSOR, f32_data(rng, n))

    tensors = [matrix("token_embd.weight", dim, vocab), vector("blk.0.attn_norm.weight", dim),
               matrix("blk.0.attn_q.weight", dim, dim), matrix("blk.0.attn_k.weight", dim, kv_dim),
               matrix("blk.0.attn_v.weight", dim, kv_dim)]
    if arch == "qwen2":
        tensors += [vector("blk.0.attn_q.bias", dim), vector("blk.0.attn_k.bias", kv_dim),
                    vector("blk.0.attn_v.bias", kv_dim)]
    if arch == "qwen3":
        tensors += [vector("blk.0.attn_q_norm.weight", head_dim), vector("blk.0.attn_k_norm.weight", head_dim)]
    tensors += [matrix("blk.0.attn_output.weight", dim, dim), vector("blk.0.ffn_norm.weight", dim),
                matrix("blk.0.ffn_gate.weight", dim, ffn), matrix("blk.0.ffn_up.weight", dim, ffn),
                matrix("blk.0.ffn_down.weight", ffn, dim), vector("output_norm.weight", dim)]
    return gguf_file(metadata, tensors)


def llama2c_checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared=True, seed=2):
    rng = random.Random(seed)
    kv_dim = dim // heads * kv_heads
    floats = (vocab * dim + layers * (dim + dim * dim + 2 * dim * kv_dim + dim * dim + dim + 3 * dim * hidden) + dim +
              2 * seq_len * (dim // heads // 2) + (0 if shared else vocab * dim))
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq_len)
    return header + f32_data(rng, floats)


def llama2c_tokenizer(pieces):
    out = struct.pack("<i", max(len(p) for p in pieces))
    for i, piece in enumerate(pieces):
        out += struct.pack("<fi", -float(i), len(piece)) + piece
    return out


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    spm, spm_size = spm_vocabulary(18)
    bpe, bpe_size = bpe_vocabulary()
    write("gguf_reader", "llama-f32.gguf", model("llama", 8, 16, 2, 2, spm, spm_size))
    write("gguf_reader", "qwen2-bpe-f32.gguf", model("qwen2", 8, 16, 2, 1, bpe, bpe_size, seed=3))
    write("gguf_reader", "qwen3-q8_0.gguf", model("qwen3", 32, 32, 2, 2, spm, spm_size, quantized=True, seed=4))
    every_type = [
        ("general.alignment", U32, 64),
        ("t.u8", U8, 7), ("t.i8", I8, -7), ("t.u16", U16, 700), ("t.i16", I16, -700), ("t.i64", I64, -1 << 40),
        ("t.u64", U64, 1 << 40), ("t.f64", F64, 0.25), ("t.bool", BOOL, False),
        ("t.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"])])),
        ("t.bools", ARRAY, (BOOL, [True, False])), ("t.f64s", ARRAY, (F64, [1.5])),
    ]
    write("gguf_reader", "vocabulary-only.gguf", gguf_file(spm + every_type, [], alignment=64))
    write("gguf_reader", "header-only.gguf", gguf_file([], []))

    write("llama2c_loader", "shared-classifier.bin", llama2c_checkpoint(8, 16, 1, 2, 2, 12, 8))
    write("llama2c_loader", "separate-classifier.bin", llama2c_checkpoint(8, 12, 2, 4, 2, 10, 4, shared=False))
    pieces = [b"<unk>", b"<s>", b"</s>", b"<0x0A>", b"<0xC3>", b" ", b"a", b"b", b" a", b"ab", b" the",
              b"t", b"h", b"e", b"\xc3\xa9", b"once", b" upon", b" time", b"P"]
    # The target takes the vocabulary size from the last byte: 3 + 'P' % 64 = 19 = len(pieces).
    assert 3 + pieces[-1][-1] % 64 == len(pieces)
    write("llama2c_loader", "tokenizer.bin", llama2c_tokenizer(pieces))


if __name__ == "__main__":
    main()
