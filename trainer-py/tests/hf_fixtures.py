"""A small random-initialised transformers model with a tokenizer built locally with the
`tokenizers` library (nothing downloaded), saved as a local model folder for the hf backend."""

from __future__ import annotations

from pathlib import Path

from .fixtures import CITIES, NAMES, TOPICS

# Qwen-style chat markup; the end-of-turn marker is also the tokenizer's eos.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    # Digits split one per token before byte-level BPE, as in Qwen tokenizers: codes score on the
    # prefix tree.
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    corpus = [f"Hello team, this is {n} from {c}. A short note about {t}. Regards. My code is 0123456789"
              for n in NAMES for c in CITIES for t in TOPICS[:2]]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    # The trainer registered SPECIALS as special tokens, so markers in rendered text stay single tokens.
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model_dir(folder: Path, *, layers: int = 2, hidden: int = 64) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    tok = build_tokenizer()
    config = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
