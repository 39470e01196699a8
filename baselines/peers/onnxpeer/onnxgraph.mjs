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
