// The nodes of an ONNX model file (ModelProto), read from the protobuf wire
// format directly: the op type, domain and name of each node of the main
// graph and its string attributes (a fused activation), which is what
// profile.mjs lists of ONNX Runtime's optimised model.

// ModelProto.graph, GraphProto.node and NodeProto's fields (onnx.proto).
const MODEL_GRAPH = 7;
const GRAPH_NODE = 1;
const NODE_NAME = 3;
const NODE_OP_TYPE = 4;
const NODE_ATTRIBUTE = 5;
const NODE_DOMAIN = 7;
// AttributeProto's name and s (a string value).
const ATTR_NAME = 1;
const ATTR_S = 4;

/**
 * The fields of one protobuf message in buf[start, end): yields
 * {field, wire, value} with value a number for varints and fixed-width
 * fields and [start, end) bounds for length-delimited ones.
 */
function* fields(buf, start, end, what) {
  let i = start;
  const varint = () => {
    let v = 0;
    let mul = 1;
    for (let k = 0; k < 10; k++) {
      if (i >= end) throw new Error(`${what}: truncated varint at byte ${i}`);
      const b = buf[i++];
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
    throw new Error(`${what}: varint longer than 10 bytes at byte ${i}`);
  };
  while (i < end) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw new Error(`${what}: field number 0 at byte ${i}`);
    switch (wire) {
      case 0:
        yield { field, wire, value: varint() };
        break;
      case 1:
      case 5: {
        const n = wire === 1 ? 8 : 4;
        if (i + n > end) throw new Error(`${what}: truncated fixed${n * 8} field ${field} at byte ${i}`);
        yield { field, wire, value: i };
        i += n;
        break;
      }
      case 2: {
        const n = varint();
        if (i + n > end) throw new Error(`${what}: field ${field} of ${n} bytes at byte ${i} runs past the end (${end})`);
        yield { field, wire, value: [i, i + n] };
        i += n;
        break;
      }
      default:
        throw new Error(`${what}: wire type ${wire} of field ${field} at byte ${i} is not one ONNX files use`);
    }
  }
}

function text(buf, [s, e]) {
  return buf.subarray(s, e).toString("utf8");
}

/** [{name, opType, domain, attrs}] (attrs: the string attributes) of the main graph of the ModelProto in buf, in order. */
export function graphNodes(buf, what = "model") {
  const nodes = [];
  let graphs = 0;
  for (const f of fields(buf, 0, buf.length, what)) {
    if (f.field !== MODEL_GRAPH || f.wire !== 2) continue;
    graphs++;
    for (const g of fields(buf, f.value[0], f.value[1], `${what}: graph`)) {
      if (g.field !== GRAPH_NODE || g.wire !== 2) continue;
      const node = { name: "", opType: "", domain: "", attrs: {} };
      for (const n of fields(buf, g.value[0], g.value[1], `${what}: node ${nodes.length}`)) {
        if (n.wire !== 2) continue;
        if (n.field === NODE_NAME) node.name = text(buf, n.value);
        else if (n.field === NODE_OP_TYPE) node.opType = text(buf, n.value);
        else if (n.field === NODE_DOMAIN) node.domain = text(buf, n.value);
        else if (n.field === NODE_ATTRIBUTE) {
          let name = "";
          let value;
          for (const a of fields(buf, n.value[0], n.value[1], `${what}: node ${nodes.length} attribute`)) {
            if (a.wire !== 2) continue;
            if (a.field === ATTR_NAME) name = text(buf, a.value);
            else if (a.field === ATTR_S) value = text(buf, a.value);
          }
          if (name && value !== undefined) node.attrs[name] = value;
        }
      }
      if (!node.opType) throw new Error(`${what}: node ${nodes.length} (${node.name || "unnamed"}) has no op_type`);
      nodes.push(node);
    }
  }
  if (graphs !== 1) throw new Error(`${what}: ${graphs} graph fields, want 1 (not an ONNX ModelProto?)`);
  return nodes;
}

// The protobuf wire format of what singleOpModel writes: ModelProto's
// ir_version, opset_import and graph; GraphProto's node, name, input and
// output; ValueInfoProto and TypeProto.Tensor; AttributeProto's f, i and s
// with their AttributeType (onnx.proto).
const MODEL_IR_VERSION = 1;
const MODEL_PRODUCER = 2;
const MODEL_OPSET = 8;
const OPSET_VERSION = 2;
const GRAPH_NAME = 2;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;
const NODE_INPUT = 1;
const NODE_OUTPUT = 2;
const VALUE_NAME = 1;
const VALUE_TYPE = 2;
const TYPE_TENSOR = 1;
const TENSOR_ELEM = 1;
const TENSOR_SHAPE = 2;
const SHAPE_DIM = 1;
const DIM_VALUE = 1;
const ATTR_F = 2;
const ATTR_I = 3;
const ATTR_TYPE = 20;
const ATTR_FLOAT = 1;
const ATTR_INT = 2;
const ATTR_STRING = 3;

/** ELEM_TYPES are TensorProto.DataType's numbers of the element types singleOpModel writes. */
export const ELEM_TYPES = { float32: 1, float16: 10, bfloat16: 16 };

/** IR_VERSION is the IR version singleOpModel writes: ONNX 1.18's, whose opset is 23. */
export const IR_VERSION = 11;

/** varint is the base-128 varint of the int64 n (a negative n in two's complement, 10 bytes). */
function varint(n) {
  if (!Number.isSafeInteger(n)) throw new Error(`varint ${n}: want a safe integer`);
  let v = BigInt.asUintN(64, BigInt(n));
  const out = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

const key = (field, wire) => varint(field * 8 + wire);
const vint = (field, n) => [...key(field, 0), ...varint(n)];
const bytes = (field, b) => [...key(field, 2), ...varint(b.length), ...b];
const str = (field, s) => bytes(field, [...Buffer.from(s, "utf8")]);

function float32(field, x) {
  const b = Buffer.alloc(4);
  b.writeFloatLE(x);
  return [...key(field, 5), ...b];
}

function attribute(name, v) {
  if (typeof v === "string") return [...str(ATTR_NAME, name), ...str(ATTR_S, v), ...vint(ATTR_TYPE, ATTR_STRING)];
  if (Number.isInteger(v?.int)) return [...str(ATTR_NAME, name), ...vint(ATTR_I, v.int), ...vint(ATTR_TYPE, ATTR_INT)];
  if (typeof v?.float === "number") return [...str(ATTR_NAME, name), ...float32(ATTR_F, v.float), ...vint(ATTR_TYPE, ATTR_FLOAT)];
  throw new Error(`attribute ${name}: ${JSON.stringify(v)} is not a string, {int} or {float}`);
}

function valueInfo(name, { type, shape }) {
  const elem = ELEM_TYPES[type];
  if (!elem) throw new Error(`${name}: element type ${type} is not one of ${Object.keys(ELEM_TYPES).join(", ")}`);
  const dims = shape.flatMap((d) => bytes(SHAPE_DIM, vint(DIM_VALUE, d)));
  const tensor = [...vint(TENSOR_ELEM, elem), ...bytes(TENSOR_SHAPE, dims)];
  return [...str(VALUE_NAME, name), ...bytes(VALUE_TYPE, bytes(TYPE_TENSOR, tensor))];
}

/**
 * singleOpModel is an ONNX ModelProto of one node of the default domain:
 * opType at opset, reading the graph inputs and writing the graph outputs
 * (names to {type, shape}, static shapes), with attrs (a string, {int: n}
 * or {float: x} each).
 * @param {{opType: string, opset: number, inputs: Record<string, {type: string, shape: number[]}>, outputs: Record<string, {type: string, shape: number[]}>, attrs?: Record<string, string | {int: number} | {float: number}>}} m
 * @returns {Uint8Array}
 */
export function singleOpModel({ opType, opset, inputs, outputs, attrs = {} }) {
  const node = [
    ...Object.keys(inputs).flatMap((n) => str(NODE_INPUT, n)),
    ...Object.keys(outputs).flatMap((n) => str(NODE_OUTPUT, n)),
    ...str(NODE_NAME, opType.toLowerCase()),
    ...str(NODE_OP_TYPE, opType),
    ...Object.entries(attrs).flatMap(([n, v]) => bytes(NODE_ATTRIBUTE, attribute(n, v))),
  ];
  const graph = [
    ...bytes(GRAPH_NODE, node),
    ...str(GRAPH_NAME, opType.toLowerCase()),
    ...Object.entries(inputs).flatMap(([n, t]) => bytes(GRAPH_INPUT, valueInfo(n, t))),
    ...Object.entries(outputs).flatMap(([n, t]) => bytes(GRAPH_OUTPUT, valueInfo(n, t))),
  ];
  return Uint8Array.from([
    ...vint(MODEL_IR_VERSION, IR_VERSION),
    ...str(MODEL_PRODUCER, "zbench onnxpeer"),
    ...bytes(MODEL_GRAPH, graph),
    ...bytes(MODEL_OPSET, [...str(1, ""), ...vint(OPSET_VERSION, opset)]),
  ]);
}
