"""hobbit's own definitions of the TensorFlow protobuf messages its readers parse.

Why a descriptor built here rather than a hand-written wire decoder: protobuf's runtime
(upb, already installed through onnx) parses in C, so a 100 MB GraphDef or a SavedModel
with thousands of function-body nodes decodes in milliseconds, and it already handles
packed/unpacked repeated fields, unknown fields and wrong wire types. All hobbit has to
supply is the schema, and only the fields it reads: a field missing from the table below
is skipped as unknown, which is exactly what protobuf does for a newer writer.

Why a private descriptor pool and package: TensorFlow, when it is imported in the same
process (the tests do), registers `tensorflow.GraphDef` and friends in protobuf's
default pool; hobbit's messages live in their own pool under `hobbit.tf`, so the two
never collide. Field numbers are TensorFlow's (graph.proto, node_def.proto,
attr_value.proto, tensor.proto, tensor_shape.proto, function.proto, op_def.proto,
saved_model.proto, meta_graph.proto, saved_object_graph.proto,
trackable_object_graph.proto, tensor_bundle.proto). DataType fields are declared int32,
the enum's wire form, so an enum value hobbit has never heard of survives parsing and
reaches attrs.py, which reports it as a TFDType."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "hobbit.tf"

# message -> [(field, number, type, oneof or None)]. A type is a scalar name, another
# message of this table, "T*" for a repeated T, or "map:K:V".
_MESSAGES: dict[str, list[tuple[str, int, str, str | None]]] = {
    "GraphDef": [("node", 1, "NodeDef*", None), ("library", 2, "FunctionDefLibrary", None)],
    "NodeDef": [
        ("name", 1, "string", None),
        ("op", 2, "string", None),
        ("input", 3, "string*", None),
        ("device", 4, "string", None),
        ("attr", 5, "map:string:AttrValue", None),
    ],
    "AttrValue": [
        ("list", 1, "ListValue", "value"),
        ("s", 2, "bytes", "value"),
        ("i", 3, "int64", "value"),
        ("f", 4, "float", "value"),
        ("b", 5, "bool", "value"),
        ("type", 6, "int32", "value"),
        ("shape", 7, "TensorShapeProto", "value"),
        ("tensor", 8, "TensorProto", "value"),
        ("placeholder", 9, "string", "value"),
        ("func", 10, "NameAttrList", "value"),
    ],
    "ListValue": [
        ("s", 2, "bytes*", None),
        ("i", 3, "int64*", None),
        ("f", 4, "float*", None),
        ("b", 5, "bool*", None),
        ("type", 6, "int32*", None),
        ("shape", 7, "TensorShapeProto*", None),
        ("tensor", 8, "TensorProto*", None),
        ("func", 9, "NameAttrList*", None),
    ],
    "NameAttrList": [("name", 1, "string", None), ("attr", 2, "map:string:AttrValue", None)],
    "TensorProto": [
        ("dtype", 1, "int32", None),
        ("tensor_shape", 2, "TensorShapeProto", None),
        ("tensor_content", 4, "bytes", None),
        ("float_val", 5, "float*", None),
        ("double_val", 6, "double*", None),
        ("int_val", 7, "int32*", None),
        ("string_val", 8, "bytes*", None),
        ("int64_val", 10, "int64*", None),
        ("bool_val", 11, "bool*", None),
        ("half_val", 13, "int32*", None),
        ("uint32_val", 16, "uint32*", None),
        ("uint64_val", 17, "uint64*", None),
    ],
    "TensorShapeProto": [("dim", 2, "Dim*", None), ("unknown_rank", 3, "bool", None)],
    "Dim": [("size", 1, "int64", None), ("name", 2, "string", None)],
    "FunctionDefLibrary": [("function", 1, "FunctionDef*", None)],
    "FunctionDef": [
        ("signature", 1, "OpDef", None),
        ("node_def", 3, "NodeDef*", None),
        ("ret", 4, "map:string:string", None),
        ("attr", 5, "map:string:AttrValue", None),
    ],
    "OpDef": [
        ("name", 1, "string", None),
        ("input_arg", 2, "ArgDef*", None),
        ("output_arg", 3, "ArgDef*", None),
    ],
    "ArgDef": [
        ("name", 1, "string", None),
        ("type", 3, "int32", None),
        ("type_attr", 4, "string", None),
        ("number_attr", 5, "string", None),
        ("type_list_attr", 6, "string", None),
    ],
    "SavedModel": [
        ("saved_model_schema_version", 1, "int64", None),
        ("meta_graphs", 2, "MetaGraphDef*", None),
    ],
    "MetaGraphDef": [
        ("meta_info_def", 1, "MetaInfoDef", None),
        ("graph_def", 2, "GraphDef", None),
        ("signature_def", 5, "map:string:SignatureDef", None),
        ("object_graph_def", 7, "SavedObjectGraph", None),
    ],
    "MetaInfoDef": [("tags", 4, "string*", None)],
    "SignatureDef": [
        ("inputs", 1, "map:string:TensorInfo", None),
        ("outputs", 2, "map:string:TensorInfo", None),
        ("method_name", 3, "string", None),
    ],
    "TensorInfo": [
        ("name", 1, "string", "encoding"),
        ("dtype", 2, "int32", None),
        ("tensor_shape", 3, "TensorShapeProto", None),
        ("coo_sparse", 4, "Opaque", "encoding"),
        ("composite_tensor", 5, "Opaque", "encoding"),
    ],
    "Opaque": [],
    "SavedObjectGraph": [
        ("nodes", 1, "SavedObject*", None),
        ("concrete_functions", 2, "map:string:SavedConcreteFunction", None),
    ],
    "SavedObject": [
        ("children", 1, "ObjectReference*", None),
        ("variable", 7, "SavedVariable", "kind"),
    ],
    "ObjectReference": [("node_id", 1, "int32", None), ("local_name", 2, "string", None)],
    "SavedConcreteFunction": [("bound_inputs", 2, "int32*", None)],
    "SavedVariable": [
        ("dtype", 1, "int32", None),
        ("shape", 2, "TensorShapeProto", None),
        ("name", 6, "string", None),
    ],
    "TrackableObjectGraph": [("nodes", 1, "TrackableObject*", None)],
    "TrackableObject": [
        ("children", 1, "ObjectReference*", None),
        ("attributes", 2, "SerializedTensor*", None),
    ],
    "SerializedTensor": [
        ("name", 1, "string", None),
        ("full_name", 2, "string", None),
        ("checkpoint_key", 3, "string", None),
    ],
    "BundleHeaderProto": [("num_shards", 1, "int32", None), ("endianness", 2, "int32", None)],
    "BundleEntryProto": [
        ("dtype", 1, "int32", None),
        ("shape", 2, "TensorShapeProto", None),
        ("shard_id", 3, "int32", None),
        ("offset", 4, "int64", None),
        ("size", 5, "int64", None),
        ("crc32c", 6, "fixed32", None),
        ("slices", 7, "Opaque*", None),
    ],
}

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "bool": _F.TYPE_BOOL,
    "float": _F.TYPE_FLOAT,
    "double": _F.TYPE_DOUBLE,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "fixed32": _F.TYPE_FIXED32,
}


def _set_type(field: descriptor_pb2.FieldDescriptorProto, type_name: str) -> None:
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    else:
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{type_name}"


def _add_map_field(message, name: str, number: int, key: str, value: str) -> None:
    """A map field is a repeated nested entry message (key = 1, value = 2) flagged as a
    map entry, which is how protoc lowers `map<K, V>`."""
    entry = message.nested_type.add(name="".join(p.capitalize() for p in name.split("_")) + "Entry")
    entry.options.map_entry = True
    for entry_name, entry_number, entry_type in (("key", 1, key), ("value", 2, value)):
        entry_field = entry.field.add(name=entry_name, number=entry_number, label=_F.LABEL_OPTIONAL)
        _set_type(entry_field, entry_type)
    field = message.field.add(name=name, number=number, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE)
    field.type_name = f".{_PACKAGE}.{message.name}.{entry.name}"


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="hobbit/tf.proto", package=_PACKAGE, syntax="proto3")
    for message_name, fields in _MESSAGES.items():
        message = file.message_type.add(name=message_name)
        oneofs: list[str] = []
        for name, number, type_name, oneof in fields:
            if type_name.startswith("map:"):
                _, key, value = type_name.split(":")
                _add_map_field(message, name, number, key, value)
                continue
            repeated = type_name.endswith("*")
            field = message.field.add(
                name=name, number=number, label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            )
            _set_type(field, type_name.rstrip("*"))
            if oneof is not None:
                if oneof not in oneofs:
                    oneofs.append(oneof)
                    message.oneof_decl.add(name=oneof)
                field.oneof_index = oneofs.index(oneof)
    return file


def _message_classes() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _message_classes()

GraphDef = _CLASSES["GraphDef"]
NodeDef = _CLASSES["NodeDef"]
AttrValue = _CLASSES["AttrValue"]
TensorProto = _CLASSES["TensorProto"]
TensorShapeProto = _CLASSES["TensorShapeProto"]
FunctionDef = _CLASSES["FunctionDef"]
SavedModel = _CLASSES["SavedModel"]
TrackableObjectGraph = _CLASSES["TrackableObjectGraph"]
BundleHeaderProto = _CLASSES["BundleHeaderProto"]
BundleEntryProto = _CLASSES["BundleEntryProto"]

# TensorFlow's DataType enum (types.proto); a *_REF variant is the base value + 100.
DATA_TYPES: dict[int, str] = {
    0: "DT_INVALID",
    1: "DT_FLOAT",
    2: "DT_DOUBLE",
    3: "DT_INT32",
    4: "DT_UINT8",
    5: "DT_INT16",
    6: "DT_INT8",
    7: "DT_STRING",
    8: "DT_COMPLEX64",
    9: "DT_INT64",
    10: "DT_BOOL",
    11: "DT_QINT8",
    12: "DT_QUINT8",
    13: "DT_QINT32",
    14: "DT_BFLOAT16",
    15: "DT_QINT16",
    16: "DT_QUINT16",
    17: "DT_UINT16",
    18: "DT_COMPLEX128",
    19: "DT_HALF",
    20: "DT_RESOURCE",
    21: "DT_VARIANT",
    22: "DT_UINT32",
    23: "DT_UINT64",
    24: "DT_FLOAT8_E5M2",
    25: "DT_FLOAT8_E4M3FN",
    26: "DT_FLOAT8_E4M3FNUZ",
    27: "DT_FLOAT8_E4M3B11FNUZ",
    28: "DT_FLOAT8_E5M2FNUZ",
    29: "DT_INT4",
    30: "DT_UINT4",
    31: "DT_INT2",
    32: "DT_UINT2",
    33: "DT_FLOAT4_E2M1FN",
}
DT_STRING = 7
DT_RESOURCE = 20
