"""Strict validation and planning of POST /v1/completions: pure, fast, no engine.

Every message is asserted to the letter, with its status, type, code and param.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from domain.completions.planning import hold_tokens, plan, steering_numbers
from domain.completions.request import CompletionRequest
from domain.completions.validation import parse_completion_request
from domain.errors import ApiError, ContextLengthExceeded, DeadlineInfeasible, InvalidRequest
from domain.error_mapping import api_error_of
from deployments.engine import EngineRefused
from deployments.checks import check_layers

SKY = [128000, 791, 13180, 374]


@dataclass
class FakeModel:
    id: str = "llama-8b"
    served_model_name: str = "meta-llama/Llama-3.1-8B"
    max_model_len: int = 131072
    n_layers: int | None = 32
    hidden_size: int | None = 4096
    vocab_size: int | None = 128256


LLAMA = FakeModel()
TRINITY = FakeModel(id="trinity-truebase", served_model_name="arcee-ai/Trinity", max_model_len=8192,
                    n_layers=None, hidden_size=3072, vocab_size=None)
_WORDS = {"The": 791, "sky": 13180, "is": 374}


def count_tokens(text: str, add_special_tokens: bool) -> list[int]:
    """Llama 3.1's count for the spec's examples: BOS, then one token a word."""
    bos = [128000] if add_special_tokens else []
    return bos + [_WORDS.get(word, 1000) for word in text.split()]


def words(k: int) -> str:
    """A text of k tokens without BOS."""
    return " ".join(["w"] * k)


def parse(**fields) -> CompletionRequest:
    return parse_completion_request({"prompt": "The sky is", **fields})


def planned(model=LLAMA, **fields):
    return plan(parse(**fields), model=model, count_tokens=count_tokens)


def refused(call, *args, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as info:
        call(*args, **kwargs)
    return info.value


def assert_error(error: ApiError, message: str, param: str | None, cls=InvalidRequest, code="invalid_request"):
    assert type(error) is cls
    assert (error.status, error.type, error.code) == (400, "invalid_request_error", code)
    assert error.message == message
    assert error.param == param
    assert error.body("req_1")["error"] == {
        "message": message, "type": "invalid_request_error", "param": param, "code": code,
    }


def assert_parse_error(body, message: str, param: str | None):
    assert_error(refused(parse_completion_request, body), message, param)


def assert_plan_error(message: str, param: str | None, cls=InvalidRequest, code="invalid_request", **fields):
    model = fields.pop("model_info", LLAMA)
    assert_error(refused(planned, model, **fields), message, param, cls, code)


def type_msg(path: str, expected: str) -> str:
    return f"Invalid type for '{path}': expected {expected}."


def value_msg(path: str, expected: str) -> str:
    return f"Invalid value for '{path}': expected {expected}."


# The spec's literal examples ---------------------------------------------------------

def test_spec_max_tokens_as_string():
    body = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": "2"}
    assert_parse_error(body, "Invalid type for 'max_tokens': expected a number.", "max_tokens")


def test_spec_unknown_field():
    body = {"model": "llama-8b", "prompt": "The sky is", "temprature": 0}
    assert_parse_error(body, "Unknown parameter: 'temprature'.", "temprature")


def test_spec_unknown_nested_field():
    vector = {"activations": [[1.0, 2.0]], "layer_indices": [0], "scael": 2}
    assert_parse_error({"prompt": "x", "apply_steering_vectors": [vector]},
                       "Unknown parameter: 'apply_steering_vectors[0].scael'.", "apply_steering_vectors")


def test_spec_logprobs_true():
    assert_parse_error({"prompt": "The sky is", "max_tokens": 2, "logprobs": True},
                       "Invalid type for 'logprobs': expected a number or null.", "logprobs")


def test_spec_logprobs_minus_one():
    assert_parse_error({"prompt": "The sky is", "max_tokens": 2, "logprobs": -1},
                       "Invalid value for 'logprobs': expected a value greater than or equal to 0.", "logprobs")


def test_spec_32000_cap():
    assert_plan_error("At most 32000 generated tokens in all: n = 2 times max_tokens = 16001 "
                      "for each of 1 prompts is 32002.", "max_tokens", max_tokens=16001, n=2)


def test_spec_one_choice_for_activations():
    # "Set n to 1" wins over the missing max_tokens (DESIGN: order of checks).
    assert_plan_error("Set n to 1: activations and steering vectors are for one choice only.",
                      "output_residual_stream", n=2, output_residual_stream=[0])


def test_spec_prompt_too_long():
    assert_plan_error(
        "This model's maximum context length is 8192 tokens. However, you requested 8190 output tokens "
        "and your prompt contains 4 input tokens, for a total of 8194 tokens. Please reduce the length of "
        "the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4)",
        "prompt", ContextLengthExceeded, "context_length_exceeded", model_info=TRINITY, max_tokens=8190)


def test_spec_layer_out_of_range():
    assert_plan_error("meta-llama/Llama-3.1-8B has Layers 0 to 31: it has no Layer 32.",
                      "output_residual_stream", max_tokens=2, output_residual_stream=[0, 32])


def test_spec_nul_character():
    for field in ("model", "prompt", "user"):
        assert_parse_error({"prompt": "x", field: "a\x00b"},
                           "A text cannot hold the character U+0000 (NUL).", field)
    assert_parse_error({"prompt": ["x", "a\x00"]}, "A text cannot hold the character U+0000 (NUL).", "prompt")
    assert_parse_error({"prompt": "x", "stop": ["\n", "\x00"]},
                       "A text cannot hold the character U+0000 (NUL).", "stop")


# The body and unknown fields --------------------------------------------------------------

@pytest.mark.parametrize("body", [[], "prompt", 3, None, True])
def test_body_must_be_an_object(body):
    assert_parse_error(body, "Invalid type for the request body: expected an object.", None)


@pytest.mark.parametrize("field", ["extra_body", "best_of", "suffix", "logit_bias", "messages", "stream_option"])
def test_unknown_top_level_fields(field):
    assert_parse_error({"prompt": "x", field: {}}, f"Unknown parameter: '{field}'.", field)


def test_unknown_field_wins_over_a_type_error():
    assert_parse_error({"prompt": "x", "max_tokens": "2", "temprature": 0},
                       "Unknown parameter: 'temprature'.", "temprature")


def test_unknown_stream_options_key():
    assert_parse_error({"prompt": "x", "stream": True, "stream_options": {"include_usage": True, "usage": True}},
                       "Unknown parameter: 'stream_options.usage'.", "stream_options")


def test_unknown_tensor_key():
    tensor = {"data": "", "dtype": "float32", "original_dtype": "torch.float32", "shape": [1, 4],
              "compression": "zstd", "level": 3}
    assert_parse_error({"prompt": "x", "apply_steering_vectors": [{"activations": tensor, "layer_indices": [0]}]},
                       "Unknown parameter: 'apply_steering_vectors[0].activations.level'.", "apply_steering_vectors")


@pytest.mark.parametrize("body", [{}, {"prompt": None}, {"model": "llama-8b", "max_tokens": 2}])
def test_prompt_is_required(body):
    assert_parse_error(body, "Missing required parameter: 'prompt'.", "prompt")


# Types ----------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,expected", [
    ("max_tokens", "2", "a number"),
    ("max_tokens", True, "a number"),
    ("n", "2", "a number"),
    ("n", [2], "a number"),
    ("temperature", "0.7", "a number"),
    ("temperature", False, "a number"),
    ("top_p", "1", "a number"),
    ("top_k", "20", "a number"),
    ("min_p", {}, "a number"),
    ("presence_penalty", "0", "a number"),
    ("frequency_penalty", True, "a number"),
    ("repetition_penalty", "1.1", "a number"),
    ("seed", "7", "a number or null"),
    ("seed", True, "a number or null"),
    ("logprobs", "5", "a number or null"),
    ("prompt_logprobs", True, "a number or null"),
    ("echo", 1, "a boolean"),
    ("echo", "true", "a boolean"),
    ("stream", 0, "a boolean"),
    ("add_special_tokens", "false", "a boolean"),
    ("model", 8, "a string"),
    ("user", 42, "a string or null"),
    ("stop", 3, "a string, a list of strings, or null"),
    ("stream_options", True, "an object or null"),
    ("priority", [1], "a number, a string of digits, a boolean, or null"),
    ("priority", "-1", "a number, a string of digits, a boolean, or null"),
    ("priority", "5.0", "a number, a string of digits, a boolean, or null"),
    ("priority", "1234567890", "a number, a string of digits, a boolean, or null"),
    ("output_residual_stream", 1, "a list of numbers, a boolean, or null"),
    ("output_residual_stream", "all", "a list of numbers, a boolean, or null"),
    ("apply_steering_vectors", {}, "a list of objects or null"),
])
def test_wrong_type(field, value, expected):
    assert_parse_error({"prompt": "x", field: value}, type_msg(field, expected), field)


@pytest.mark.parametrize("prompt", [3, True, {"text": "x"}, [True], [{"a": 1}], [None]])
def test_wrong_prompt_type(prompt):
    assert_parse_error({"prompt": prompt}, type_msg(
        "prompt", "a string, a list of token ids, a list of strings, or a list of token-id lists"), "prompt")


@pytest.mark.parametrize("prompt,path,expected", [
    ([791, "sky"], "prompt[1]", "a number"),
    ([791, True], "prompt[1]", "a number"),
    (["The sky", 374], "prompt[1]", "a string"),
    ([[791], "sky"], "prompt[1]", "a list of token ids"),
    ([[791], [13180, "x"]], "prompt[1][1]", "a number"),
])
def test_wrong_prompt_item_type(prompt, path, expected):
    assert_parse_error({"prompt": prompt}, type_msg(path, expected), "prompt")


def test_wrong_nested_types():
    assert_parse_error({"prompt": "x", "stop": ["a", 1]}, type_msg("stop[1]", "a string"), "stop")
    assert_parse_error({"prompt": "x", "stream": True, "stream_options": {"include_usage": 1}},
                       type_msg("stream_options.include_usage", "a boolean"), "stream_options")
    assert_parse_error({"prompt": "x", "stream": True, "stream_options": {"continuous_usage_stats": "yes"}},
                       type_msg("stream_options.continuous_usage_stats", "a boolean"), "stream_options")
    assert_parse_error({"prompt": "x", "output_residual_stream": [0, "1"]},
                       type_msg("output_residual_stream[1]", "a number"), "output_residual_stream")
    assert_parse_error({"prompt": "x", "output_residual_stream": [0, True]},
                       type_msg("output_residual_stream[1]", "a number"), "output_residual_stream")


def test_whole_numbers_for_integer_fields():
    assert parse(max_tokens=2.0, n=1.0, seed=7.0, logprobs=5.0).max_tokens == 2
    assert type(parse(max_tokens=2.0).max_tokens) is int
    assert parse(prompt=[791.0, 13180]).prompts == [[791, 13180]]
    for field in ("max_tokens", "n", "seed", "logprobs", "prompt_logprobs", "top_k", "priority"):
        assert_parse_error({"prompt": "x", field: 2.5}, value_msg(field, "a whole number"), field)
    assert_parse_error({"prompt": [791, 1.5]}, value_msg("prompt[1]", "a whole number"), "prompt")


def test_whole_numbers_for_decimal_fields():
    req = parse(temperature=1, top_p=1, min_p=0, presence_penalty=-2, frequency_penalty=2, repetition_penalty=2)
    assert (req.temperature, req.top_p, req.repetition_penalty) == (1.0, 1.0, 2.0)
    assert type(req.temperature) is float


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10**400])
def test_decimal_fields_must_be_finite(value):
    for field in ("temperature", "repetition_penalty"):
        assert_parse_error({"prompt": "x", field: value}, value_msg(field, "a finite number"), field)


# Ranges -------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,expected", [
    ("max_tokens", -1, "a value greater than or equal to 0"),
    ("n", 0, "a value greater than or equal to 1"),
    ("temperature", -0.1, "a value greater than or equal to 0"),
    ("temperature", 2.01, "a value less than or equal to 2"),
    ("top_p", 0, "a value greater than 0"),
    ("top_p", 1.5, "a value less than or equal to 1"),
    ("top_k", -2, "a value greater than or equal to -1"),
    ("top_k", 2**63, "a value less than or equal to 9223372036854775807"),
    ("min_p", -0.5, "a value greater than or equal to 0"),
    ("min_p", 1.01, "a value less than or equal to 1"),
    ("presence_penalty", -2.5, "a value greater than or equal to -2"),
    ("presence_penalty", 3, "a value less than or equal to 2"),
    ("frequency_penalty", -3, "a value greater than or equal to -2"),
    ("frequency_penalty", 2.5, "a value less than or equal to 2"),
    ("repetition_penalty", 0, "a value greater than 0"),
    ("repetition_penalty", -1, "a value greater than 0"),
    ("seed", -1, "a value greater than or equal to 0"),
    ("seed", 2**63, "a value less than or equal to 9223372036854775807"),
    ("logprobs", -1, "a value greater than or equal to 0"),
    ("logprobs", 101, "a value less than or equal to 100"),
    ("prompt_logprobs", -2, "a value greater than or equal to -1"),
    ("prompt_logprobs", 101, "a value less than or equal to 100"),
    ("priority", -1, "a value greater than or equal to 0"),
    ("priority", 2**63, "a value less than or equal to 9223372036854775807"),
    ("output_residual_stream", [], "a non-empty list"),
    ("apply_steering_vectors", [], "a non-empty list"),
    ("prompt", [], "a non-empty list"),
])
def test_out_of_range(field, value, expected):
    assert_parse_error({"prompt": "x", field: value}, value_msg(field, expected), field)


def test_range_edges_are_taken():
    req = parse(max_tokens=0, temperature=2, top_p=1, top_k=-1, min_p=1, presence_penalty=-2,
                frequency_penalty=2, seed=0, logprobs=100, prompt_logprobs=-1, priority=0)
    assert (req.max_tokens, req.temperature, req.top_k, req.logprobs, req.prompt_logprobs) == (0, 2.0, -1, 100, -1)
    assert parse(seed=2**63 - 1, logprobs=0, prompt_logprobs=100).seed == 2**63 - 1


def test_negative_layer():
    assert_parse_error({"prompt": "x", "output_residual_stream": [0, -1]},
                       value_msg("output_residual_stream[1]", "a value greater than or equal to 0"),
                       "output_residual_stream")


# null means the default ---------------------------------------------------------------

ALL_FIELDS = ["model", "max_tokens", "n", "stop", "echo", "add_special_tokens", "temperature", "top_p", "top_k",
              "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "logprobs",
              "prompt_logprobs", "stream", "stream_options", "priority", "user", "output_residual_stream",
              "apply_steering_vectors"]


def test_null_is_the_default_for_every_field():
    assert parse_completion_request({"prompt": "x", **dict.fromkeys(ALL_FIELDS)}) == CompletionRequest(prompts=["x"])


def test_defaults():
    req = parse()
    assert req == CompletionRequest(prompts=["The sky is"])
    assert (req.n, req.temperature, req.top_p, req.top_k, req.min_p, req.repetition_penalty) == (1, 1.0, 1.0, 0, 0.0, 1.0)
    assert (req.stream, req.echo, req.add_special_tokens, req.priority, req.stop) == (False, False, True, 0, [])


# Odd values that count ------------------------------------------------------------------

@pytest.mark.parametrize("value,expected", [("5", 5), ("0", 0), ("000000042", 42), (True, 1), (False, 0),
                                            (None, 0), (7, 7), (3.0, 3)])
def test_priority_values(value, expected):
    assert parse(priority=value).priority == expected


@pytest.mark.parametrize("prompt,expected", [
    ("The sky is", ["The sky is"]),
    ("", [""]),
    (SKY, [SKY]),
    (["The sky is", "The grass is"], ["The sky is", "The grass is"]),
    ([SKY, [128000, 791]], [SKY, [128000, 791]]),
    ([[]], [[]]),
])
def test_prompt_forms(prompt, expected):
    assert parse(prompt=prompt).prompts == expected


def test_stop_forms():
    assert parse(stop="\n").stop == ["\n"]
    assert parse(stop=["\n", "."]).stop == ["\n", "."]
    assert parse(stop=[]).stop == []
    assert parse(stop=["a", "b", "c", "d", "e"]).stop == ["a", "b", "c", "d", "e"]  # the cap is in plan


@pytest.mark.parametrize("stop", ["", ["\n", ""]])
def test_empty_stop_text(stop):
    assert_parse_error({"prompt": "x", "stop": stop}, "stop cannot contain an empty string.", "stop")


def test_stream_options():
    req = parse(stream=True, stream_options={"include_usage": True})
    assert (req.include_usage, req.continuous_usage_stats) == (True, False)
    req = parse(stream=True, stream_options={"continuous_usage_stats": True})
    assert (req.include_usage, req.continuous_usage_stats) == (False, True)
    req = parse(stream=True, stream_options={"include_usage": None})
    assert (req.include_usage, req.continuous_usage_stats) == (False, False)


@pytest.mark.parametrize("value,expected", [(True, True), (False, None), (None, None), ([2, 0, 2], [0, 2]),
                                            ([5.0], [5])])
def test_output_residual_stream_forms(value, expected):
    assert parse(output_residual_stream=value).output_residual_stream == expected


# Rules between fields ---------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [0, 0.000009])
def test_n_above_1_needs_sampling(temperature):
    assert_parse_error({"prompt": "x", "n": 2, "max_tokens": 2, "temperature": temperature},
                       "Set n to 1, or temperature to 0.00001 or more: at a lower temperature, "
                       "Inference picks the likeliest token each time.", "n")


def test_n_above_1_at_the_greedy_edge():
    assert parse(n=2, temperature=0.00001).n == 2
    assert parse(n=1, temperature=0).temperature == 0.0


@pytest.mark.parametrize("fields", [{"stream_options": {"include_usage": True}},
                                    {"stream_options": {}, "stream": False}])
def test_stream_options_without_stream(fields):
    assert_parse_error({"prompt": "x", **fields},
                       "Set stream to true, or leave out stream_options: stream_options is only for streams.",
                       "stream_options")


def test_stream_options_null_without_stream():
    assert parse(stream_options=None).include_usage is False


@pytest.mark.parametrize("value", [0, 5, -1])
def test_prompt_logprobs_with_stream(value):
    assert_parse_error({"prompt": "x", "stream": True, "prompt_logprobs": value},
                       "Leave out prompt_logprobs, or stream to false: prompt_logprobs does not work with stream: true.",
                       "prompt_logprobs")
    assert parse(stream=False, prompt_logprobs=value).prompt_logprobs == value


# Steering vectors: shapes and types ----------------------------------------------------------

def vector(**fields):
    return {"activations": [[0.5, 1, -2.0]], "layer_indices": [1], **fields}


def steer_error(vectors, message, **fields):
    assert_parse_error({"prompt": "x", "apply_steering_vectors": vectors, **fields}, message, "apply_steering_vectors")


def test_steering_vector_defaults():
    [v] = parse(apply_steering_vectors=[vector(scale=None, norm_match=None)]).apply_steering_vectors
    assert v == {"activations": [[0.5, 1, -2.0]], "layer_indices": [1], "scale": 1.0, "norm_match": False,
                 "position_indices": None, "position_spans": None}


def test_steering_vector_forms():
    spans = vector(position_spans=[[2, 5], [0, 1]], scale=2, norm_match=True)
    positions = {"activations": [[[1.0, 2.0], [3.0, 4.0]]], "layer_indices": [0], "position_indices": [2, 3]}
    tensor = {"activations": {"data": "KLUv", "dtype": "int16", "original_dtype": "torch.bfloat16",
                              "shape": [1, 4096], "compression": "zstd"}, "layer_indices": [1]}
    vectors = parse(apply_steering_vectors=[spans, positions, tensor]).apply_steering_vectors
    assert vectors[0]["scale"] == 2.0 and vectors[0]["norm_match"] is True
    assert vectors[0]["position_spans"] == [[2, 5], [0, 1]]
    assert vectors[1]["position_indices"] == [2, 3]
    assert vectors[2]["activations"]["shape"] == [1, 4096]


@pytest.mark.parametrize("item,message", [
    ("v", type_msg("apply_steering_vectors[0]", "an object")),
    ({"layer_indices": [1]}, "Missing required parameter: 'apply_steering_vectors[0].activations'."),
    ({"activations": [[1.0]]}, "Missing required parameter: 'apply_steering_vectors[0].layer_indices'."),
    ({"activations": [[1.0]], "layer_indices": None}, "Missing required parameter: 'apply_steering_vectors[0].layer_indices'."),
    (vector(activations="AAAA"), type_msg("apply_steering_vectors[0].activations",
                                         "a list of rows of numbers, or an encoded tensor")),
    (vector(activations=[[1.0, "2"]]), type_msg("apply_steering_vectors[0].activations[0][1]", "a number")),
    (vector(activations=[[1.0, True]]), type_msg("apply_steering_vectors[0].activations[0][1]", "a number")),
    (vector(activations=[[1.0], 2.0]), type_msg("apply_steering_vectors[0].activations[1]", "a list of numbers")),
    (vector(activations=[[[1.0]], [2.0]]), type_msg("apply_steering_vectors[0].activations[1][0]",
                                                   "a list of numbers")),
    (vector(activations=[[[1.0]], 2.0]), type_msg("apply_steering_vectors[0].activations[1]",
                                                 "a list of lists of numbers")),
    (vector(activations=[[[1.0], ["x"]]]), type_msg("apply_steering_vectors[0].activations[0][1][0]", "a number")),
    (vector(layer_indices=1), type_msg("apply_steering_vectors[0].layer_indices", "a list of numbers")),
    (vector(layer_indices=[-1]), value_msg("apply_steering_vectors[0].layer_indices[0]",
                                           "a value greater than or equal to 0")),
    (vector(scale="2"), type_msg("apply_steering_vectors[0].scale", "a number")),
    (vector(scale=float("nan")), value_msg("apply_steering_vectors[0].scale", "a finite number")),
    (vector(norm_match=1), type_msg("apply_steering_vectors[0].norm_match", "a boolean")),
    (vector(position_indices=[0, "1"]), type_msg("apply_steering_vectors[0].position_indices[1]", "a number")),
    (vector(position_indices=[-3]), value_msg("apply_steering_vectors[0].position_indices[0]",
                                              "a value greater than or equal to 0")),
    (vector(position_spans=[]), value_msg("apply_steering_vectors[0].position_spans", "a non-empty list")),
    (vector(position_spans=[2, 5]), type_msg("apply_steering_vectors[0].position_spans[0]", "a list of two numbers")),
    (vector(position_spans=[[2, 5, 7]]), type_msg("apply_steering_vectors[0].position_spans[0]",
                                                  "a list of two numbers")),
    (vector(position_spans=[[2, -5]]), value_msg("apply_steering_vectors[0].position_spans[0][1]",
                                                 "a value greater than or equal to 0")),
])
def test_steering_vector_errors(item, message):
    steer_error([item], message)


def test_steering_error_names_the_vector_index():
    steer_error([vector(), vector(scale=[1])], type_msg("apply_steering_vectors[1].scale", "a number"))


TENSOR = {"data": "KLUv", "dtype": "float32", "original_dtype": "torch.float32", "shape": [1, 3], "compression": "zstd"}


@pytest.mark.parametrize("change,message", [
    ({"data": None}, "Missing required parameter: 'apply_steering_vectors[0].activations.data'."),
    ({"shape": None}, "Missing required parameter: 'apply_steering_vectors[0].activations.shape'."),
    ({"data": 5}, type_msg("apply_steering_vectors[0].activations.data", "a string")),
    ({"dtype": "f\x00"}, "A text cannot hold the character U+0000 (NUL)."),
    ({"shape": "1,3"}, type_msg("apply_steering_vectors[0].activations.shape", "a list of numbers")),
    ({"shape": [1, -3]}, value_msg("apply_steering_vectors[0].activations.shape[1]",
                                   "a value greater than or equal to 0")),
    ({"compression": "gzip"}, value_msg("apply_steering_vectors[0].activations.compression", "'zstd'")),
])
def test_steering_tensor_errors(change, message):
    steer_error([vector(activations={**TENSOR, **change})], message)


# Planning: the one-choice rules ------------------------------------------------------------

ONE_CHOICE = "Set n to 1: activations and steering vectors are for one choice only."
ONE_PROMPT = "Send one prompt: activations and steering vectors are for one prompt only."


def test_one_choice_rules():
    assert_plan_error(ONE_CHOICE, "apply_steering_vectors", n=2, max_tokens=2, apply_steering_vectors=[vector()])
    assert_plan_error(ONE_CHOICE, "output_residual_stream", n=2, max_tokens=2, output_residual_stream=True,
                      apply_steering_vectors=[vector()])
    assert_plan_error(ONE_PROMPT, "output_residual_stream", prompt=["a", "b"], max_tokens=2,
                      output_residual_stream=[0])
    assert_plan_error(ONE_PROMPT, "apply_steering_vectors", prompt=[SKY, SKY], max_tokens=2,
                      apply_steering_vectors=[vector()])


def test_false_capture_is_no_capture():
    p = planned(prompt=["a", "b"], n=2, max_tokens=2, output_residual_stream=False)
    assert p.request.output_residual_stream is None


def test_one_choice_wins_over_caps():
    assert_plan_error(ONE_CHOICE, "output_residual_stream", n=200, max_tokens=2, output_residual_stream=[0])


# Planning: size caps ---------------------------------------------------------------------

def test_choices_cap():
    assert_plan_error("At most 128 choices in all: n = 129 for each of 1 prompts is 129.", "n", n=129, max_tokens=1)
    assert_plan_error("At most 128 choices in all: n = 65 for each of 2 prompts is 130.", "n",
                      prompt=["a", "b"], n=65, max_tokens=1)
    assert len(planned(prompt=["a", "b"], n=64, max_tokens=1).prompt_token_ids) == 2


def test_generated_tokens_cap():
    assert_plan_error("At most 32000 generated tokens in all: n = 1 times max_tokens = 32001 for each of 1 prompts "
                      "is 32001.", "max_tokens", max_tokens=32001, stream=True)
    assert_plan_error("At most 32000 generated tokens in all: n = 4 times max_tokens = 5000 for each of 2 prompts "
                      "is 40000.", "max_tokens", prompt=["a", "b"], n=4, max_tokens=5000)
    assert planned(prompt=["a", "b"], n=4, max_tokens=4000).max_tokens == 4000
    assert planned(max_tokens=32000, stream=True).max_tokens == 32000


def test_generated_tokens_cap_wins_over_deadline():
    assert_plan_error("At most 32000 generated tokens in all: n = 1 times max_tokens = 40000 for each of 1 prompts "
                      "is 40000.", "max_tokens", max_tokens=40000)


def test_generated_tokens_cap_wins_over_the_missing_max_tokens():
    # The caps come before the max_tokens rules; n alone never passes 32000.
    assert_plan_error("At most 128 choices in all: n = 200 for each of 1 prompts is 200.", "n", n=200)


def test_stop_cap():
    assert_plan_error("At most 4 stop texts: the request has 5.", "stop", max_tokens=2, stop=list("abcde"))
    assert planned(max_tokens=2, stop=list("abcd")).request.stop == list("abcd")


def test_full_vocab_cap():
    # 255 words + BOS = 256 tokens, the most for -1.
    assert planned(prompt=words(255), prompt_logprobs=-1, max_tokens=1).prompt_token_ids[0][0] == 128000
    assert_plan_error("prompt_logprobs: -1 takes at most 256 prompt tokens in all × n: 257 prompt tokens × n = 1 "
                      "is 257.", "prompt_logprobs", prompt=words(256), prompt_logprobs=-1, max_tokens=1)
    assert_plan_error("prompt_logprobs: -1 takes at most 256 prompt tokens in all × n: 200 prompt tokens × n = 2 "
                      "is 400.", "prompt_logprobs", prompt=[[1] * 100, [2] * 100], n=2, prompt_logprobs=-1,
                      max_tokens=1)


def test_full_vocab_cap_with_capture_and_steering():
    assert_plan_error("prompt_logprobs: -1 takes at most 16 prompt tokens in all × n with output_residual_stream: "
                      "17 prompt tokens × n = 1 is 17.", "prompt_logprobs",
                      prompt=words(16), prompt_logprobs=-1, max_tokens=1, output_residual_stream=[0])
    assert planned(prompt=words(15), prompt_logprobs=-1, max_tokens=1, output_residual_stream=[0])
    # Steering vectors keep 256 (DESIGN.md).
    assert planned(prompt=words(255), prompt_logprobs=-1, max_tokens=1, apply_steering_vectors=[vector()])


def test_top_logprobs_cap():
    tokens = 2**25 // 101 + 1  # token ids count one each
    total = tokens * 101
    assert_plan_error(f"At most 33554432 top log probabilities of the prompt: {tokens} prompt tokens × n = 1 × 101 "
                      f"(prompt_logprobs = 100 + 1) is {total}.", "prompt_logprobs",
                      model_info=FakeModel(max_model_len=10**6), prompt=[1] * tokens, prompt_logprobs=100, max_tokens=1)


def test_top_logprobs_cap_with_echo():
    model = FakeModel(max_model_len=10**6)
    assert_plan_error("At most 33554432 top log probabilities of the prompt: 100000 prompt tokens × n = 2 × 202 "
                      "(prompt_logprobs = 100 + 1, logprobs = 100 + 1 with echo) is 40400000.", "prompt_logprobs",
                      model_info=model, prompt=[[1] * 50000, [2] * 50000], n=2, max_tokens=1,
                      prompt_logprobs=100, logprobs=100, echo=True)
    assert_plan_error("At most 33554432 top log probabilities of the prompt: 400000 prompt tokens × n = 1 × 101 "
                      "(logprobs = 100 + 1 with echo) is 40400000.", "logprobs",
                      model_info=model, prompt=[1] * 400000, max_tokens=1, logprobs=100, echo=True)
    # Without echo, logprobs counts no prompt token.
    assert planned(model, prompt=[1] * 400000, max_tokens=1, logprobs=100).max_tokens == 1


def test_capture_cap():
    # 32 Layers × 256 tokens × 4096 is 2**25 exactly.
    assert planned(prompt=[1] * 200, max_tokens=56, output_residual_stream=True).max_tokens == 56
    assert_plan_error("A capture is at most 33554432 numbers: 32 Layers × 257 tokens (200 of the prompt and "
                      "max_tokens = 57) × hidden size 4096 is 33685504. Read fewer Layers, or set a smaller max_tokens.",
                      "output_residual_stream", prompt=[1] * 200, max_tokens=57, output_residual_stream=True)
    assert_plan_error("A capture is at most 33554432 numbers: 2 Layers × 4100 tokens (4 of the prompt and "
                      "max_tokens = 4096) × hidden size 4096 is 33587200. Read fewer Layers, or set a smaller max_tokens.",
                      "output_residual_stream", max_tokens=4096, output_residual_stream=[3, 1, 3])


def test_capture_without_max_tokens():
    # llama-8b: the default (15600 without stream) passes the cap (docs: Read Activations).
    assert_plan_error("A capture is at most 33554432 numbers: 1 Layer × 15604 tokens (4 of the prompt and "
                      "max_tokens = 15600) × hidden size 4096 is 63913984. Read fewer Layers, or set a smaller "
                      "max_tokens.", "output_residual_stream", output_residual_stream=[0])
    # trinity-truebase: one Layer fits without max_tokens, two do not.
    assert planned(TRINITY, output_residual_stream=[0]).max_tokens == 8188
    assert_plan_error("A capture is at most 33554432 numbers: 2 Layers × 8192 tokens (4 of the prompt and "
                      "max_tokens = 8188) × hidden size 3072 is 50331648. Read fewer Layers, or set a smaller "
                      "max_tokens.", "output_residual_stream", model_info=TRINITY, output_residual_stream=[0, 1])


def test_capture_of_a_model_without_facts():
    unknown = FakeModel(n_layers=None, hidden_size=None)
    assert planned(unknown, max_tokens=2, output_residual_stream=True).max_tokens == 2  # Inference checks
    assert_plan_error("A capture is at most 33554432 numbers: 1 Layer × 2052 tokens (4 of the prompt and "
                      "max_tokens = 2048) × hidden size 16384 is 33619968. Read fewer Layers, or set a smaller "
                      "max_tokens.", "output_residual_stream", model_info=unknown, max_tokens=2048,
                      output_residual_stream=[40])


def test_steering_vectors_cap():
    assert_plan_error("At most 8 Steering vectors: the request has 9.", "apply_steering_vectors",
                      max_tokens=2, apply_steering_vectors=[vector()] * 9)
    assert planned(max_tokens=2, apply_steering_vectors=[vector()] * 8).max_tokens == 2


def test_steering_numbers_cap():
    row = [0.0] * 4096
    big = {"activations": [row] * 64, "layer_indices": list(range(64))}  # 262144 numbers
    assert planned(max_tokens=2, apply_steering_vectors=[big] * 8).max_tokens == 2
    one_longer_row = dict(big, activations=[row] * 63 + [row + [0.0]])
    assert_plan_error("At most 2097152 numbers in all Steering vectors: the request has 2097153.",
                      "apply_steering_vectors", max_tokens=2, apply_steering_vectors=[big] * 7 + [one_longer_row])


def test_steering_numbers_count():
    assert steering_numbers({"activations": [[1.0] * 10, [2.0] * 10]}) == 20
    assert steering_numbers({"activations": [[[1.0] * 10] * 3]}) == 30
    assert steering_numbers({"activations": [[1.0] * 10], "position_spans": [[2, 5], [10, 12]]}) == 50
    assert steering_numbers({"activations": {"shape": [2, 3, 4096]}}) == 24576
    assert steering_numbers({"activations": {"shape": [1, 4096]}, "position_spans": [[0, 4096]]}) == 2**24


def test_steering_numbers_cap_counts_span_positions():
    spanned = vector(activations=[[0.0] * 4096], position_spans=[[0, 513]])  # 2101248 numbers
    assert_plan_error("At most 2097152 numbers in all Steering vectors: the request has 2101248.",
                      "apply_steering_vectors", max_tokens=2, apply_steering_vectors=[spanned])


# Planning: max_tokens ------------------------------------------------------------------

def test_default_max_tokens_without_stream_is_clamped_to_15600():
    p = planned()
    assert (p.max_tokens, p.max_tokens_source, p.deadline_clamped) == (15600, "default", True)
    assert p.prompt_token_ids == [SKY]


def test_default_max_tokens_with_stream():
    p = planned(stream=True)
    assert (p.max_tokens, p.max_tokens_source, p.deadline_clamped) == (32000, "default", False)


def test_default_max_tokens_is_the_room_left():
    p = planned(TRINITY)
    assert (p.max_tokens, p.deadline_clamped) == (8188, False)
    p = planned(FakeModel(max_model_len=20000), stream=True)
    assert (p.max_tokens, p.deadline_clamped) == (19996, False)
    p = planned(FakeModel(max_model_len=20000))
    assert (p.max_tokens, p.deadline_clamped) == (15600, True)


def test_default_max_tokens_is_at_least_1():
    p = planned(TRINITY, prompt=[1] * 8191)
    assert p.max_tokens == 1
    assert_plan_error("This model's maximum context length is 8192 tokens. However, you requested 1 output tokens and "
                      "your prompt contains 8192 input tokens, for a total of 8193 tokens. Please reduce the length of "
                      "the input prompt or the number of requested output tokens. (parameter=input_tokens, value=8192)",
                      "prompt", ContextLengthExceeded, "context_length_exceeded", model_info=TRINITY,
                      prompt=[1] * 8192)


def test_explicit_max_tokens():
    p = planned(max_tokens=2)
    assert (p.max_tokens, p.max_tokens_source, p.deadline_clamped) == (2, "client", False)
    assert planned(max_tokens=15600).max_tokens == 15600
    assert planned(max_tokens=20000, stream=True).max_tokens == 20000


def test_max_tokens_required():
    message = "Set max_tokens: a request with more than one prompt, or with n above 1, must set it."
    assert_plan_error(message, "max_tokens", n=2)
    assert_plan_error(message, "max_tokens", prompt=["a", "b"])
    assert_plan_error(message, "max_tokens", prompt=[SKY, SKY], stream=True)


def test_deadline_infeasible():
    error = refused(planned, LLAMA, max_tokens=15601)
    assert_error(error, "Without stream, max_tokens is at most 15600: Inference cannot write 15601 tokens within the "
                        "API's 14-minute wait. Set stream to true, or max_tokens to 15600 or less.",
                 "max_tokens", DeadlineInfeasible, "deadline_infeasible")
    assert error.headers() == {"x-should-retry": "false"}


def test_deadline_wins_over_context_length():
    assert_plan_error("Without stream, max_tokens is at most 15600: Inference cannot write 20000 tokens within the "
                      "API's 14-minute wait. Set stream to true, or max_tokens to 15600 or less.",
                      "max_tokens", DeadlineInfeasible, "deadline_infeasible", model_info=TRINITY, max_tokens=20000)


def test_context_length_names_the_prompt_that_does_not_fit():
    assert_plan_error("This model's maximum context length is 8192 tokens. However, you requested 100 output tokens "
                      "and your prompt contains 8100 input tokens, for a total of 8200 tokens. Please reduce the length "
                      "of the input prompt or the number of requested output tokens. (parameter=input_tokens, "
                      "value=8100)", "prompt", ContextLengthExceeded, "context_length_exceeded",
                      model_info=TRINITY, prompt=[[1] * 10, [2] * 8100], max_tokens=100)
    assert planned(TRINITY, max_tokens=8188).max_tokens == 8188


def test_max_tokens_0_needs_room_for_one_token():
    assert planned(TRINITY, prompt=[1] * 8191, max_tokens=0, echo=True).max_tokens == 0
    assert_plan_error("This model's maximum context length is 8192 tokens. However, you requested 1 output tokens and "
                      "your prompt contains 8192 input tokens, for a total of 8193 tokens. Please reduce the length of "
                      "the input prompt or the number of requested output tokens. (parameter=input_tokens, value=8192)",
                      "prompt", ContextLengthExceeded, "context_length_exceeded", model_info=TRINITY,
                      prompt=[1] * 8192, max_tokens=0)


# Planning: prompts and the model's facts ----------------------------------------------------

def test_prompt_tokens_are_counted_as_the_hold_counts_them():
    assert planned(max_tokens=2).prompt_token_ids == [SKY]
    assert planned(max_tokens=2, add_special_tokens=False).prompt_token_ids == [SKY[1:]]
    # Token ids count one each, and get no BOS.
    assert planned(prompt=[791, 13180], max_tokens=2).prompt_token_ids == [[791, 13180]]


def test_empty_prompts():
    assert planned(prompt="", max_tokens=2).prompt_token_ids == [[128000]]  # BOS alone
    assert_plan_error("Invalid value for 'prompt': expected at least one token.", "prompt",
                      prompt="", add_special_tokens=False, max_tokens=2)
    assert_plan_error("Invalid value for 'prompt': expected at least one token.", "prompt", prompt=[[]], max_tokens=2)
    assert_plan_error("Invalid value for 'prompt[1]': expected at least one token.", "prompt",
                      prompt=[SKY, []], max_tokens=2)


def test_layers_in_range():
    assert planned(max_tokens=2, output_residual_stream=[0, 31]).request.output_residual_stream == [0, 31]
    assert planned(max_tokens=1, prompt=[1] * 4, output_residual_stream=True).request.output_residual_stream is True
    assert_plan_error("meta-llama/Llama-3.1-8B has Layers 0 to 31: it has no Layer 40.", "output_residual_stream",
                      max_tokens=2, output_residual_stream=[50, 40])


def checked_by_the_api(check, *args):
    """A check below the API raises a neutral refusal; the API answers its 400 (its one mapping)."""
    try:
        check(*args)
    except EngineRefused as refusal:
        raise api_error_of(refusal) from None


def test_layer_check_for_steering_and_for_models_without_facts():
    error = refused(checked_by_the_api, check_layers, [1, 32], LLAMA, "apply_steering_vectors")
    assert_error(error, "meta-llama/Llama-3.1-8B has Layers 0 to 31: it has no Layer 32.", "apply_steering_vectors")
    check_layers([999], FakeModel(n_layers=None), "output_residual_stream")  # Inference checks


def test_layer_message_falls_back_to_the_model_id():
    @dataclass
    class Bare:
        id: str = "tiny"
        max_model_len: int = 2048
        n_layers: int = 4
        hidden_size: int = 64
        vocab_size: int = 128256

    error = refused(plan, parse(max_tokens=2, output_residual_stream=[4]), model=Bare(), count_tokens=count_tokens)
    assert_error(error, "tiny has Layers 0 to 3: it has no Layer 4.", "output_residual_stream")


def test_token_ids_outside_the_vocabulary_reach_inference():
    # Inference refuses them and the API passes its 400 on (docs: Strict validation).
    assert planned(prompt=[128000, 999999], max_tokens=1).prompt_token_ids == [[128000, 999999]]
    assert planned(prompt=[-5], max_tokens=1).prompt_token_ids == [[-5]]


def test_order_of_checks():
    # 2 before 3: the one-choice rule before the 32000 cap.
    assert_plan_error(ONE_CHOICE, "output_residual_stream", n=2, max_tokens=20000, output_residual_stream=[0])
    # 3 before 4: a cap before the missing max_tokens.
    assert_plan_error("At most 4 stop texts: the request has 5.", "stop", n=2, stop=list("abcde"))
    # 4 before 5: the context before the Layer.
    assert_plan_error(
        "This model's maximum context length is 8192 tokens. However, you requested 8190 output tokens and your "
        "prompt contains 4 input tokens, for a total of 8194 tokens. Please reduce the length of the input prompt "
        "or the number of requested output tokens. (parameter=input_tokens, value=4)", "prompt",
        ContextLengthExceeded, "context_length_exceeded",
        model_info=FakeModel(max_model_len=8192, hidden_size=64), max_tokens=8190, output_residual_stream=[40], stream=True)


# The Hold -----------------------------------------------------------------------------

def test_hold_tokens():
    assert hold_tokens(planned(max_tokens=2)) == 6  # the spec's example: 4 + 2
    assert hold_tokens(planned(prompt=[SKY, [1, 2]], n=3, max_tokens=5)) == (4 + 15) + (2 + 15)
    assert hold_tokens(planned(max_tokens=0, echo=True, n=2, temperature=1)) == 4 + 2
    assert hold_tokens(planned(TRINITY)) == 8192


def test_mixed_prompt_list():
    assert_parse_error({"prompt": ["The sky is", SKY]}, type_msg("prompt[1]", "a string"), "prompt")
    assert_parse_error({"prompt": [SKY, "The sky is"]}, type_msg("prompt[1]", "a list of token ids"), "prompt")
