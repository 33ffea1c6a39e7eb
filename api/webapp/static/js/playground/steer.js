// Steer: one Steering vector for apply_steering_vectors (spec: "Steer a Completion"), from a
// .npy or .safetensors file or pasted base64, with its Layers, scale, norm match, and the
// positions or spans that it steers. A vector never goes in the address.
import { html } from "../html.js";
import { Checkbox, Field } from "../components/field.js";

const INTEGER = /^\d+$/;

export function newSteer() {
  return { name: "", rows: null, layers: "", scale: "1", norm_match: false, where: "all", positions: "", error: null };
}

// -- reading a vector --------------------------------------------------------------------------------

function bf16(bits) {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, bits << 16, true);
  return view.getFloat32(0, true);
}

function f16(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** The numbers of little-endian bytes of a NumPy or safetensors type. */
function numbersOf(bytes, offset, count, type) {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset);
  const out = new Array(count);
  const readers = {
    f4: (i) => view.getFloat32(i * 4, true), F32: (i) => view.getFloat32(i * 4, true),
    f8: (i) => view.getFloat64(i * 8, true), F64: (i) => view.getFloat64(i * 8, true),
    f2: (i) => f16(view.getUint16(i * 2, true)), F16: (i) => f16(view.getUint16(i * 2, true)),
    BF16: (i) => bf16(view.getUint16(i * 2, true)),
  };
  const read = readers[type];
  if (!read) throw new Error(`The vector's numbers are ${type}: the App reads float32, float64, float16 and bfloat16.`);
  for (let i = 0; i < count; i += 1) out[i] = read(i);
  return out;
}

/** Rows of numbers (one a Layer) of a flat list and a shape of 1 or 2 axes. */
function rowsOf(flat, shape) {
  if (shape.length === 1) return [flat];
  if (shape.length !== 2) throw new Error(`The vector has ${shape.length} axes: the App takes one row, or one row for each Layer.`);
  const [count, width] = shape;
  return Array.from({ length: count }, (_, i) => flat.slice(i * width, (i + 1) * width));
}

function readNpy(bytes) {
  const magic = String.fromCharCode(...bytes.slice(1, 6));
  if (bytes[0] !== 0x93 || magic !== "NUMPY") throw new Error("The file is not a .npy file.");
  const major = bytes[6];
  const headerLength = major >= 2 ? new DataView(bytes.buffer, bytes.byteOffset + 8, 4).getUint32(0, true)
    : new DataView(bytes.buffer, bytes.byteOffset + 8, 2).getUint16(0, true);
  const start = major >= 2 ? 12 : 10;
  const header = new TextDecoder().decode(bytes.slice(start, start + headerLength));
  const descr = /'descr':\s*'([<>|=]?)(\w+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape) throw new Error("The .npy file's header has no type or shape.");
  if (/'fortran_order':\s*True/.test(header)) throw new Error("The .npy array is in Fortran order: save it in C order.");
  if (descr[1] === ">") throw new Error("The .npy array is big-endian: save it little-endian.");
  const dims = shape[1].split(",").map((part) => part.trim()).filter(Boolean).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  return rowsOf(numbersOf(bytes, start + headerLength, count, descr[2]), dims);
}

function readSafetensors(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  const length = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.slice(8, 8 + length)));
  const names = Object.keys(header).filter((name) => name !== "__metadata__");
  if (names.length !== 1) throw new Error(`The file holds ${names.length} tensors: the App takes a file of one.`);
  const tensor = header[names[0]];
  const count = tensor.shape.reduce((a, b) => a * b, 1);
  return rowsOf(numbersOf(bytes, 8 + length + tensor.data_offsets[0], count, tensor.dtype), tensor.shape);
}

export async function readVectorFile(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (/\.npy$/i.test(file.name)) return readNpy(bytes);
  if (/\.safetensors$/i.test(file.name)) return readSafetensors(bytes);
  throw new Error("Choose a .npy or a .safetensors file.");
}

/** Pasted text: the API's encoded vector as JSON, or base64 of float32 numbers (one row). */
export function readPasted(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    const encoded = JSON.parse(trimmed);
    if (!encoded.data || !encoded.shape) throw new Error("The pasted JSON is not an encoded vector: it needs data and shape.");
    return encoded;
  }
  let binary;
  try {
    binary = atob(trimmed.replace(/\s+/g, ""));
  } catch {
    throw new Error("The pasted text is not base64.");
  }
  if (binary.length % 4) throw new Error("The pasted bytes are not float32 numbers: their length is not a multiple of 4.");
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return [numbersOf(bytes, 0, bytes.length / 4, "f4")];
}

// -- the Steering vector ------------------------------------------------------------------------------

function listOf(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

function spansOf(text) {
  return text.split(/[\s,]+/).filter(Boolean).map((part) => part.split(/-|:|\.\./).map(Number));
}

/** The Steering vector of the form, or {error} (messages say the field and its rule). */
export function steeringVector(steer) {
  if (!steer || !steer.rows) return { vector: null };
  const layers = listOf(steer.layers);
  if (!layers.length || layers.some((layer) => !INTEGER.test(layer))) return { error: "Steer: the Layers to steer, such as 1 or 1, 2." };
  const scale = Number(steer.scale);
  if (steer.scale.trim() === "" || !Number.isFinite(scale)) return { error: "Steer: the scale is a number, such as 2." };
  const vector = { layer_indices: layers.map(Number), scale };
  if (steer.norm_match) vector.norm_match = true;
  const encoded = !Array.isArray(steer.rows);
  let rows = steer.rows;
  if (!encoded && rows.length === 1 && layers.length > 1) rows = layers.map(() => rows[0]);
  if (!encoded && rows.length !== layers.length) {
    return { error: `Steer: the vector has ${rows.length} rows, and ${layers.length} Layers are named. Name one Layer for each row.` };
  }
  if (steer.where === "positions") {
    const positions = listOf(steer.positions);
    if (!positions.length || positions.some((p) => !INTEGER.test(p))) return { error: "Steer: the positions, such as 2, 5." };
    if (encoded) return { error: "Steer: an encoded vector steers every position or spans. Upload the vector as a file." };
    vector.position_indices = positions.map(Number);
    rows = rows.map((row) => positions.map(() => row));
  } else if (steer.where === "spans") {
    const spans = spansOf(steer.positions);
    if (!spans.length || spans.some((span) => span.length !== 2 || span.some((n) => !Number.isInteger(n) || n < 0))) {
      return { error: "Steer: the spans as start-end, such as 2-5, 8-10." };
    }
    vector.position_spans = spans;
  }
  return { vector: { activations: rows, ...vector } };
}

/** The form's Steer of a Run's Steering vector (Use these settings, Restore). */
export function steerOf(vector) {
  const steer = newSteer();
  const positions = vector.position_indices;
  let rows = vector.activations;
  if (positions && Array.isArray(rows)) rows = rows.map((row) => row[0]);
  return {
    ...steer, name: "The Run's vector", rows,
    layers: (vector.layer_indices || []).join(", "), scale: String(vector.scale ?? 1), norm_match: Boolean(vector.norm_match),
    where: positions ? "positions" : vector.position_spans ? "spans" : "all",
    positions: positions ? positions.join(", ") : vector.position_spans ? vector.position_spans.map(([a, b]) => `${a}-${b}`).join(", ") : "",
  };
}

function describe(steer) {
  if (!steer.rows) return "";
  if (!Array.isArray(steer.rows)) return `${steer.name}: an encoded vector of shape ${JSON.stringify(steer.rows.shape)}.`;
  const width = steer.rows[0] ? steer.rows[0].length : 0;
  return `${steer.name}: ${steer.rows.length} row${steer.rows.length === 1 ? "" : "s"} of ${width} numbers.`;
}

export function SteerFields({ steer, onChange, error, hiddenSize }) {
  const value = steer || newSteer();
  const set = (changes) => onChange({ ...value, ...changes });
  async function choose(event) {
    const file = event.currentTarget.files[0];
    if (!file) return;
    try {
      set({ rows: await readVectorFile(file), name: file.name, error: null });
    } catch (failure) {
      set({ rows: null, name: "", error: failure.message });
    }
  }
  function paste(text) {
    if (!text.trim()) return set({ pasted: text, error: null });
    try {
      set({ pasted: text, rows: readPasted(text), name: "The pasted vector", error: null });
    } catch (failure) {
      set({ pasted: text, rows: null, error: failure.message });
    }
  }
  const where = value.where || "all";
  const problem = value.error || error;
  // The legend labels the file input too: "Steer" names the place to upload a vector.
  return html`<fieldset class=${`steer${problem ? " field-invalid" : ""}`}>
    <legend><label for="steer-file">Steer</label></legend>
    <p class="hint" id="steer-hint">Add a Steering vector of the model's hidden size${hiddenSize ? ` (${hiddenSize} numbers)` : ""}: a row for each Layer, or one row for them all.</p>
    <div class="field">
      <p class="field-label" id="steer-file-words">Vector file (.npy or .safetensors)</p>
      <input id="steer-file" type="file" accept=".npy,.safetensors" aria-describedby="steer-file-words steer-hint"
        aria-invalid=${problem ? "true" : undefined} onChange=${choose} />
    </div>
    <${Field} label="Or paste base64" multiline value=${value.pasted || ""} onInput=${paste}
      hint="float32 numbers, or an encoded vector as JSON." />
    ${value.rows ? html`<p class="steer-loaded">${describe(value)}
      <button type="button" class="link-button" onClick=${() => onChange(null)}>Remove the vector</button></p>` : null}
    <${Field} label="Layers" value=${value.layers} onInput=${(layers) => set({ layers })} hint="Such as 1, or 1, 2." inputmode="numeric" />
    <${Field} label="Scale" value=${value.scale} onInput=${(scale) => set({ scale })} inputmode="decimal" />
    <${Checkbox} label="Norm match" checked=${value.norm_match} onChange=${(norm_match) => set({ norm_match })} />
    <div class="field" role="radiogroup" aria-label="Where the vector goes">
      ${[["all", "Every position"], ["positions", "Positions"], ["spans", "Spans"]].map(([key, label]) => html`
        <label class="radio"><input type="radio" name="steer-where" value=${key} checked=${where === key}
          onChange=${() => set({ where: key })} /> ${label}</label>`)}
    </div>
    ${where !== "all" ? html`<${Field} label=${where === "positions" ? "Positions" : "Spans"} value=${value.positions}
      onInput=${(positions) => set({ positions })} hint=${where === "positions" ? "Such as 2, 5: counted from 0 at the first prompt token." : "Such as 2-5, 8-10: a span covers start to end - 1."} />` : null}
    ${problem ? html`<p class="field-error" role="alert">${problem}</p>` : null}
  </fieldset>`;
}
