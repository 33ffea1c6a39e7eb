// The Playground's settings: each field of POST /v1/completions that the form sets (spec:
// "Completions", "Request fields"), its label, its default and its range, what the form holds as
// typed (text), and the request that it makes. The form's defaults are the API's, except for
// max_tokens, which a Run always sets, and Top logprobs shown, which starts at 5 for the heatmap.
import { steeringVector, steerOf } from "./steer.js";

const GROUPED = new Intl.NumberFormat("en-US");
export const MOST_TOKENS = 32000;

// kind: int, number, bool, text, stops, layers. api: the API's default (null: none, left out).
// initial: what a new form holds. min/max: inclusive bounds; above: an exclusive lower bound.
export const FIELDS = [
  { key: "max_tokens", label: "Max tokens", kind: "int", initial: "64", api: null, min: 1, max: MOST_TOKENS, basic: true },
  { key: "temperature", label: "Temperature", kind: "number", initial: "1", api: 1, min: 0, max: 2, basic: true },
  { key: "top_p", label: "Top p", kind: "number", initial: "1", api: 1, above: 0, max: 1, basic: true },
  { key: "n", label: "Choices", kind: "int", initial: "1", api: 1, min: 1, max: 128, basic: true },
  { key: "logprobs", label: "Top logprobs shown", kind: "int", initial: "5", api: null, min: 0, max: 100, basic: true },
  { key: "top_k", label: "Top k", kind: "int", initial: "0", api: 0, min: -1, hint: "0 or -1 turns the filter off." },
  { key: "min_p", label: "Min p", kind: "number", initial: "0", api: 0, min: 0, max: 1 },
  { key: "presence_penalty", label: "Presence penalty", kind: "number", initial: "0", api: 0, min: -2, max: 2 },
  { key: "frequency_penalty", label: "Frequency penalty", kind: "number", initial: "0", api: 0, min: -2, max: 2 },
  { key: "repetition_penalty", label: "Repetition penalty", kind: "number", initial: "1", api: 1, above: 0, hint: "1 turns the penalty off." },
  { key: "seed", label: "Seed", kind: "int", initial: "", api: null, min: 0, hint: "Blank: a new random seed." },
  { key: "stop", label: "Stop", kind: "stops", initial: "", api: null, hint: "Up to 4 texts, one a line. \\n is a line break, \\t a tab." },
  // "Echo", not "Echo the prompt": "Prompt" labels the prompt box alone.
  { key: "echo", label: "Echo", kind: "bool", initial: false, api: false, hint: "Puts the prompt in front of the text." },
  { key: "add_special_tokens", label: "Add special tokens", kind: "bool", initial: true, api: true },
  { key: "output_residual_stream", label: "Read Layers", kind: "layers", initial: "", api: null, hint: "Layers such as 0, 2, or all. Blank reads none." },
  { key: "priority", label: "Priority", kind: "int", initial: "0", api: 0, min: 0, hint: "A lower number runs first." },
  { key: "user", label: "User", kind: "text", initial: "", api: null, hint: "OpenAI's id for the person who asked." },
];
export const BY_KEY = Object.fromEntries(FIELDS.map((field) => [field.key, field]));
// Settings that live in the address (each is a string or a boolean); the Steering vector never does.
export const ADDRESS_KEYS = ["model", ...FIELDS.map((field) => field.key)];

export function defaults(model = "") {
  const settings = { model, steer: null };
  for (const field of FIELDS) settings[field.key] = field.initial;
  return settings;
}

function grouped(value) {
  return GROUPED.format(value);
}

/** A field's range in plain words: "more than 0 and at most 1", "from 0 to 2", "0 or more". */
export function rangeWords(field, limits = {}) {
  const max = upper(field, limits);
  const low = field.above !== undefined ? `more than ${grouped(field.above)}` : field.min !== undefined ? grouped(field.min) : null;
  if (field.above !== undefined) return max !== undefined ? `${low} and at most ${grouped(max)}` : low;
  if (low !== null && max !== undefined) return `from ${low} to ${grouped(max)}`;
  if (low !== null) return `${low} or more`;
  return max !== undefined ? `at most ${grouped(max)}` : "";
}

// A model's own limits narrow a field: its max_logprobs, its context.
function upper(field, limits) {
  if (field.key === "logprobs" && limits.max_logprobs) return Math.min(field.max, limits.max_logprobs);
  if (field.key === "max_tokens" && limits.max_model_len) return Math.min(field.max, limits.max_model_len - 1);
  return field.max;
}

/** The message of a number out of range, as the Playground says it: "Max tokens: at most 32,000.",
 * "Top p: more than 0 and at most 1."; null when the value is in range. */
function outOfRange(field, value, limits) {
  const max = upper(field, limits);
  const tooLow = (field.above !== undefined && !(value > field.above)) || (field.min !== undefined && value < field.min);
  if (field.key === "max_tokens") {
    if (value > max) {
      // Narrowed by the model's context (a field of its own max, the Loom's 1,000, says just that).
      return max < field.max
        ? `Max tokens: at most ${grouped(max)}, as the model's context is ${grouped(limits.max_model_len)} tokens.`
        : `Max tokens: at most ${grouped(max)}.`;
    }
    return tooLow ? `Max tokens: at least ${grouped(field.min)}.` : null;
  }
  if (tooLow || (max !== undefined && value > max)) return `${field.label}: ${rangeWords(field, limits)}.`;
  return null;
}

const INTEGER = /^[+-]?\d+$/;
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/** The Layers of "0, 2" or "all" (true), or an error message. A Layer past the model's last is the
 * API's to refuse (spec: "When a setting is at fault, such as a Layer that the model does not have,
 * the App marks that setting until you change it"): the output then says why, in the API's words. */
function layersOf(raw) {
  const text = raw.trim();
  if (/^all$/i.test(text)) return { value: true };
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (!parts.length || parts.some((part) => !/^\d+$/.test(part))) return { error: "Read Layers: Layers 0 or more, such as 0, 2, or all." };
  return { value: [...new Set(parts.map(Number))].sort((a, b) => a - b) };
}

/** The Layers that the model has, in words for the hint: "The model has Layers 0 to 3." */
export function layersWords(limits = {}) {
  return limits.n_layers ? `The model has Layers 0 to ${grouped(limits.n_layers - 1)}.` : "";
}

/** The stop texts of the box: one a line, with \n and \t read as a line break and a tab. */
export function stopsOf(raw) {
  return raw.split("\n").filter((line) => line !== "")
    .map((line) => line.replace(/\\(n|t|\\)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : "\\")));
}

function stopsText(stops) {
  return (Array.isArray(stops) ? stops : [stops])
    .map((stop) => stop.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t")).join("\n");
}

/** One field's value for the request (undefined: left out, at the API's default) or its error. */
export function parse(field, raw, limits = {}) {
  if (field.kind === "bool") return { value: raw === field.api ? undefined : raw };
  if (field.kind === "text") return { value: raw === "" ? undefined : raw };
  const text = String(raw ?? "").trim();
  if (text === "") {
    return field.key === "max_tokens" ? { error: "Max tokens: set a number of tokens, such as 64." } : { value: undefined };
  }
  if (field.kind === "stops") {
    const stops = stopsOf(String(raw));
    if (stops.length > 4) return { error: `Stop: at most 4 texts, one a line. It has ${stops.length}.` };
    return { value: stops.length ? stops : undefined };
  }
  if (field.kind === "layers") return layersOf(text);
  const whole = field.kind === "int";
  if (!(whole ? INTEGER : DECIMAL).test(text)) {
    return { error: whole ? `${field.label}: a whole number, ${rangeWords(field, limits)}.` : `${field.label}: a number, ${rangeWords(field, limits)}.` };
  }
  const value = Number(text);
  const error = outOfRange(field, value, limits);
  if (error) return { error };
  return { value: field.api !== null && value === field.api ? undefined : value };
}

/** Every field's error ({key: message}) for the model's limits; the Steering vector's too. */
export function errorsOf(settings, limits = {}) {
  const errors = {};
  for (const field of FIELDS) {
    const { error } = parse(field, settings[field.key], limits);
    if (error) errors[field.key] = error;
  }
  const steer = steeringVector(settings.steer);
  if (steer.error || (settings.steer && settings.steer.error)) errors.apply_steering_vectors = steer.error || settings.steer.error;
  return errors;
}

/** The body of POST /v1/completions for these settings: the model, the prompt, max_tokens, a
 * stream (a Run streams), and each field that differs from the API's default. */
export function requestOf(settings, prompt, limits = {}) {
  const request = { model: settings.model, prompt };
  for (const field of FIELDS) {
    const { value } = parse(field, settings[field.key], limits);
    if (value !== undefined) request[field.key] = value;
  }
  const { vector } = steeringVector(settings.steer);
  if (vector) request.apply_steering_vectors = [vector];
  request.stream = true;
  return request;
}

/** The form's settings of a Run's request (Use these settings, Restore): every value as sent, also
 * one out of today's range, which the form then marks. */
export function settingsOf(request) {
  const settings = defaults(request.model || "");
  for (const field of FIELDS) {
    const value = request[field.key];
    if (value === undefined || value === null) {
      if (field.kind !== "bool" && field.kind !== "text" && field.api === null && field.key !== "max_tokens") settings[field.key] = "";
      else if (field.api !== null) settings[field.key] = field.kind === "bool" ? field.api : String(field.api);
      continue;
    }
    if (field.kind === "bool") settings[field.key] = value === true;
    else if (field.kind === "stops") settings[field.key] = stopsText(value);
    else if (field.kind === "layers") settings[field.key] = value === true ? "all" : value === false ? "" : value.join(", ");
    else settings[field.key] = String(value);
  }
  const vectors = request.apply_steering_vectors;
  if (Array.isArray(vectors) && vectors.length) settings.steer = steerOf(vectors[0]);
  return settings;
}

// The fields that a Run's line lists when they differ, by the API's names.
const SHOWN = ["max_tokens", ...FIELDS.map((field) => field.key).filter((key) => key !== "max_tokens"), "apply_steering_vectors"];

function same(a, b) {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

export function valueWords(key, value) {
  if (key === "apply_steering_vectors") return value ? `${value.length} vector${value.length === 1 ? "" : "s"}` : "none";
  if (value === undefined || value === null) {
    const field = BY_KEY[key];
    return field && field.api !== null ? String(field.api) : "none";
  }
  if (key === "output_residual_stream") return value === true ? "all" : value.join(", ");
  if (key === "stop") return (Array.isArray(value) ? value : [value]).map((s) => JSON.stringify(s)).join(" ");
  if (typeof value === "number") return grouped(value);
  return String(value);
}

export function labelOf(key) {
  if (key === "model") return "Model";
  if (key === "apply_steering_vectors") return "Steer";
  return BY_KEY[key] ? BY_KEY[key].label : key;
}

/** The settings in which each request differs from the others: [[label, words]...] for each. */
export function differences(requests) {
  const keys = ["model", ...SHOWN].filter((key) => requests.some((r) => !same(r[key], requests[0][key])));
  return requests.map((request) => keys.map((key) => [labelOf(key), valueWords(key, request[key])]));
}

/** How the settings on screen differ from a Run's own: [[label, the Run's, on screen]...]. */
export function changesFrom(request, current) {
  return ["model", ...SHOWN].filter((key) => !same(request[key], current[key]))
    .map((key) => [labelOf(key), valueWords(key, request[key]), valueWords(key, current[key])]);
}

/** Copy settings: the model, max_tokens, and each setting that differs from the API's default, as
 * JSON with the field names of POST /v1/completions. */
export function settingsJson(request) {
  const { prompt, stream, stream_options: _, ...rest } = request;
  return JSON.stringify(rest, null, 2);
}

/** Copy as API request: a streaming curl that reads the key from $ACS_API_KEY, without the fields
 * at the API's defaults (the request holds only those that differ). */
export function curlOf(request, base) {
  const body = JSON.stringify({ ...request, stream: true });
  const quoted = `'${body.replace(/'/g, "'\\''")}'`;
  return [
    `curl -N "${base}/v1/completions" \\`,
    `  -H "Authorization: Bearer $ACS_API_KEY" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d ${quoted}`,
  ].join("\n");
}
