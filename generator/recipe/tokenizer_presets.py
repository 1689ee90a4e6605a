"""The tokenizer presets a recipe names: the tiny tokenizer's training corpus, the chat templates, and how
each family's real tokenizer is built (``tiny.tokenizer.kind`` and ``pipeline``), defined once for the
recipe's checks (``family``) and the tokenizer they build (``generator/checkpoint/tiny_tokenizer.py``).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

# ---------------------------------------------------------------------------------------
# the tokenizer's training corpus and chat template (both part of the cache key)

CORPUS = """\
The river ran low that summer, and the children walked along its stony bed, turning over flat rocks
to look for crayfish. Their grandmother watched from the bank with a basket of bread and cheese.
She had grown up in the same valley, and she told them how the water once rose so high in spring
that the old mill wheel turned for three weeks without rest.

A library is a quiet machine for remembering. Every book on its shelves was written by someone who
wanted to be understood, and every reader who opens one completes a conversation that began long
ago. The librarian knows this, which is why she stamps the return date so carefully.

In the morning the market fills with voices. Farmers arrange tomatoes in pyramids, a baker sets out
warm loaves, and a man with a small cart sells coffee in paper cups. By noon the square is crowded;
by evening only pigeons and a few folded tables remain.

Mathematics is the art of giving the same name to different things. Two apples and two ships share
the number two, and a circle drawn in sand obeys the same rules as the orbit of a distant moon.
Learning to see these patterns takes patience, but it rewards the patient with a kind of freedom.

The engineer tested the bridge model in the wind tunnel. At low speeds it stood perfectly still;
as the fan turned faster, the deck began to twist, slowly at first and then with a steady rhythm.
She wrote down the speed, stopped the fan, and added two thin braces under the road.

Weather changes quickly in the mountains. A clear sky at breakfast can turn to hail before lunch,
so careful walkers carry a warm layer, a map, some water and a little food, and they turn back
early rather than late. The summit will still be there next year.

When you learn a new language, begin with the words you need every day: hello, thank you, where is
the station, how much does this cost. Speak them aloud, make mistakes, and laugh at them. Grammar
will follow the habit of speaking, not the other way around.

Cooking rice is simple and easy to get wrong. Rinse it until the water runs clear, use a little
less water than you think, bring it to a boil, then cover it and lower the heat. Do not lift the lid
for fifteen minutes, and let it rest for five more before serving.

<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Can you explain what a neural network is in two sentences?<|im_end|>
<|im_start|>assistant
<think>
The user wants a short explanation, so I should keep it simple.
</think>

A neural network is a function built from many small units that each weigh their inputs and pass
the result on. By adjusting those weights on examples, the network learns to map inputs to outputs.<|im_end|>
<|im_start|>user
What is the capital of France, and what river runs through it?<|im_end|>
<|im_start|>assistant
The capital of France is Paris, and the Seine runs through it.<|im_end|>
<|im_start|>user
<|vision_start|><|image_pad|><|vision_end|>What color is the square in this picture?<|im_end|>
<|im_start|>assistant
The square in the picture is red.<|im_end|>
<|im_start|>user
Write a haiku about autumn leaves.<|im_end|>
<|im_start|>assistant
Red leaves drift and fall,
the path is soft underfoot,
the old tree breathes out.<|im_end|>
<|im_start|>user
Thanks! How many days are there in a leap year?<|im_end|>
<|im_start|>assistant
A leap year has 366 days: February gets a 29th day.<|im_end|>

Numbers and symbols: 0 1 2 3 4 5 6 7 8 9 10 42 100 2024 3.14 1e-6 (a + b) * c = d; x[i] != y[j].
"""

# Behaves like the Qwen3.5 template on what the tiny checkpoint is used for: one
# <|im_start|>role ... <|im_end|> block per message, image and video parts as vision-pad
# placeholders, and a generation prompt that opens the thinking block (or closes it empty when
# enable_thinking=False is passed).
CHAT_TEMPLATE = """\
{%- for message in messages -%}
    {{- '<|im_start|>' + message['role'] + '\\n' -}}
    {%- if message['content'] is string -%}
        {{- message['content'] -}}
    {%- else -%}
        {%- for part in message['content'] -%}
            {%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif part['type'] == 'video' or 'video' in part -%}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
            {%- elif 'text' in part -%}
                {{- part['text'] -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{- '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\\n' -}}
    {%- if enable_thinking is defined and enable_thinking is false -%}
        {{- '<think>\\n\\n</think>\\n\\n' -}}
    {%- else -%}
        {{- '<think>\\n' -}}
    {%- endif -%}
{%- endif -%}
"""

# Qwen3's behaviour: the generation prompt opens the assistant turn and leaves thinking to the
# model, unless enable_thinking=False is passed, which writes an empty thinking block.
QWEN3_CHAT_TEMPLATE = """\
{%- for message in messages -%}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\\n' -}}
    {%- if enable_thinking is defined and enable_thinking is false -%}
        {{- '<think>\\n\\n</think>\\n\\n' -}}
    {%- endif -%}
{%- endif -%}
"""

# Llama 3.1 Instruct's layout: the text opens with the BOS token, a system block (with the
# knowledge cutoff and a date, even when no system message is given) comes first, and every
# message is a header followed by its stripped content and <|eot_id|>.
LLAMA3_CHAT_TEMPLATE = """\
{{- bos_token -}}
{%- if messages[0]['role'] == 'system' -%}
    {%- set system = messages[0]['content'] | trim -%}
    {%- set messages = messages[1:] -%}
{%- else -%}
    {%- set system = '' -%}
{%- endif -%}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' -}}
{{- 'Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n' + system + '<|eot_id|>' -}}
{%- for message in messages -%}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' -}}
    {{- message['content'] | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
{%- endif -%}
"""

# Byte-level BPE split regexes: Llama 3's groups digits in threes, Qwen2's splits every digit.
LLAMA3_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


# The Qwen VL Instruct checkpoints' behaviour: messages and image parts as above, and a generation
# prompt that only opens the assistant turn (no thinking block); Qwen2-VL and Qwen2.5-VL also open
# with a default system message when the conversation has none.
QWEN3_VL_CHAT_TEMPLATE = CHAT_TEMPLATE[: CHAT_TEMPLATE.index("{%- if add_generation_prompt")] + (
    "{%- if add_generation_prompt -%}\n    {{- '<|im_start|>assistant\\n' -}}\n{%- endif -%}\n"
)
QWEN2_VL_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' -%}\n"
    "    {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}\n{%- endif -%}\n"
) + QWEN3_VL_CHAT_TEMPLATE

#: LightOnOCR's: an empty system turn first, each image part one <|image_pad|> (the processor expands it), no
#: vision_start / vision_end around it
LIGHTON_OCR_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' -%}{{- '<|im_start|>system<|im_end|>\\n' -}}{%- endif -%}\n"
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for part in message['content'] -%}{%- if part['type'] == 'image' or 'image' in part -%}"
    "{{- '<|image_pad|>' -}}{%- elif 'text' in part -%}{{- part['text'] -}}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@dataclasses.dataclass(frozen=True)
class TokenizerKind:
    """How a family's real tokenizer is built, which the tiny one imitates (``tiny.tokenizer.kind``).

    ``cls``: the class AutoTokenizer gives for the family's checkpoints (``PreTrainedTokenizerFast``
    when they ship only tokenizer.json); ``regex``: a callable giving the split regex (imported late);
    ``bos`` (prepended to every encoding when set), ``eos`` and ``pad``: special tokens or None;
    ``padding_side`` None leaves the class default, as a checkpoint that does not set it does.
    """

    cls: str
    regex: Any
    template: str
    bos: str | None = None
    eos: str | None = "<|endoftext|>"
    pad: str | None = "<|endoftext|>"
    padding_side: str | None = "left"
    nfc: bool = True
    #: the token that closes every encoding after the BOS opened it (an encoder's [SEP]: [CLS] A [SEP]), or None
    closer: str | None = None


def _regex_of(tokenization_module: str):
    """The split regex a transformers tokenization module defines, imported when first asked for."""
    return lambda: importlib.import_module(f"transformers.models.{tokenization_module}").PRETOKENIZE_REGEX


TOKENIZER_KINDS = {
    # Qwen3.5 / 3.6: no BOS, eos = pad = <|endoftext|>, left padding
    "qwen3_5": TokenizerKind("Qwen3_5Tokenizer", _regex_of("qwen3_5.tokenization_qwen3_5"), CHAT_TEMPLATE),
    # Qwen3 (post-trained checkpoints): no BOS, eos <|im_end|>, pad <|endoftext|>
    "qwen3": TokenizerKind("Qwen2Tokenizer", _regex_of("qwen2.tokenization_qwen2"), QWEN3_CHAT_TEMPLATE, eos="<|im_end|>",
                           padding_side=None),
    # Qwen2-VL, Qwen2.5-VL and Qwen3-VL (Instruct): Qwen2's tokenizer, eos <|im_end|>, pad <|endoftext|>
    "qwen2_vl": TokenizerKind("Qwen2Tokenizer", _regex_of("qwen2.tokenization_qwen2"), QWEN2_VL_CHAT_TEMPLATE,
                              eos="<|im_end|>", padding_side=None),
    "qwen3_vl": TokenizerKind("Qwen2Tokenizer", _regex_of("qwen2.tokenization_qwen2"), QWEN3_VL_CHAT_TEMPLATE,
                              eos="<|im_end|>", padding_side=None),
    # Llama 3.x: tokenizer.json only, BOS prepended, eos <|eot_id|> (Instruct), no pad token
    "llama3": TokenizerKind("PreTrainedTokenizerFast", lambda: LLAMA3_PRETOKENIZE_REGEX, LLAMA3_CHAT_TEMPLATE,
                            bos="<|begin_of_text|>", eos="<|eot_id|>", pad=None, padding_side=None, nfc=False),
    # BERT's WordPiece (generator/checkpoint/wordpiece.py): no byte-level split, no chat template; [PAD] pads on the
    # right, [CLS] and [SEP] frame every encoding
    "wordpiece": TokenizerKind("BertTokenizer", lambda: "", "", bos=None, eos=None, pad="[PAD]", padding_side="right",
                               nfc=False),
    # RoBERTa's byte-level BPE and XLM-R's unigram (generator/checkpoint/encoder_tokenizers.py): <s> A </s>, no chat
    # template, <pad> pads on the right
    "roberta": TokenizerKind("RobertaTokenizer", lambda: "", "", bos="<s>", eos="</s>", pad="<pad>",
                             padding_side="right", nfc=False),
    # ModernBERT's: OLMo's byte-level BPE in a PreTrainedTokenizerFast, framed [CLS] A [SEP] (a pair [CLS] A [SEP] B
    # [SEP]), no chat template, [PAD] pads on the right
    "modernbert": TokenizerKind("PreTrainedTokenizerFast", _regex_of("qwen2.tokenization_qwen2"), "", bos="[CLS]",
                                eos="[SEP]", pad="[PAD]", padding_side="right", nfc=False, closer="[SEP]"),
    "xlm_roberta": TokenizerKind("XLMRobertaTokenizer", lambda: "", "", bos="<s>", eos="</s>", pad="<pad>",
                                 padding_side="right", nfc=False),
    # T5's unigram (generator/checkpoint/encoder_tokenizers.py): A </s>, no BOS, <pad> pads on the right
    "t5": TokenizerKind("T5Tokenizer", lambda: "", "", bos=None, eos="</s>", pad="<pad>", padding_side="right",
                        nfc=False),
    # CamemBERT's unigram: XLM-R's framing, <s> 5 and </s> 6 past fairseq's unused copies
    "camembert": TokenizerKind("CamembertTokenizer", lambda: "", "", bos="<s>", eos="</s>", pad="<pad>",
                               padding_side="right", nfc=False),
    # Whisper's byte-level BPE (generator/checkpoint/speech.py): <|endoftext|> is bos, eos, pad and unk
    "whisper": TokenizerKind("WhisperTokenizer", lambda: "", "", bos="<|endoftext|>", eos="<|endoftext|>", pad="<|endoftext|>",
                             padding_side="right", nfc=False),
    # Pegasus's unigram (generator/checkpoint/encoder_tokenizers.py): A </s>, no BOS, <pad> 0 pads on the right
    "pegasus": TokenizerKind("PegasusTokenizer", lambda: "", "", bos=None, eos="</s>", pad="<pad>",
                             padding_side="right", nfc=False),
    # Marian's ids and framing in a tokenizer.json (MarianTokenizer needs sentencepiece): A </s>, no BOS, <pad> last
    "marian": TokenizerKind("PreTrainedTokenizerFast", lambda: "", "", bos=None, eos="</s>", pad="<pad>",
                            padding_side="right", nfc=False),
}


#: the split regexes and chat templates a recipe's ``pipeline`` names
SPLITS = {"qwen3_5": _regex_of("qwen3_5.tokenization_qwen3_5"), "qwen2": _regex_of("qwen2.tokenization_qwen2"),
          "llama3": lambda: LLAMA3_PRETOKENIZE_REGEX}
TEMPLATES = {"qwen3_5": CHAT_TEMPLATE, "qwen3": QWEN3_CHAT_TEMPLATE, "qwen2_vl": QWEN2_VL_CHAT_TEMPLATE,
             "qwen3_vl": QWEN3_VL_CHAT_TEMPLATE, "llama3": LLAMA3_CHAT_TEMPLATE,
             "lighton_ocr": LIGHTON_OCR_CHAT_TEMPLATE}
#: what ``tiny.tokenizer.pipeline`` may declare, and how each field is read
PIPELINE_FIELDS = {"class": "cls", "split": "regex", "chat_template": "template", "bos": "bos", "eos": "eos",
                   "pad": "pad", "padding_side": "padding_side", "nfc": "nfc", "closer": "closer"}
