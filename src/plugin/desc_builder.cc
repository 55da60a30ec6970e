#include "plugin/desc_builder.h"

namespace strata::plugin {

const char* DescBuilder::Keep(const std::string& s) {
  strings_.push_back(s);
  return strings_.back().c_str();
}

int32_t DescBuilder::ValueIndex(int v) {
  if (v < 0) return -1;
  auto it = value_index_.find(v);
  if (it != value_index_.end()) return it->second;
  strata_value_desc d{};
  d.struct_size = sizeof(d);
  d.name = Keep(g_.ValueName(v));
  if (const Tensor* c = g_.Constant(v)) {
    d.dtype = static_cast<int32_t>(c->dtype());
    d.rank = static_cast<int32_t>(c->rank());
    dims_.push_back(ToVector(c->shape()));
    if (c->dtype() != DataType::kString) {
      d.const_data = c->raw_data();
      d.const_bytes = c->byte_size();
    }
  } else {
    const TypeInfo& t = g_.values[v].type;
    d.dtype = static_cast<int32_t>(t.elem_type);
    d.rank = t.has_shape ? static_cast<int32_t>(t.dims.size()) : -1;
    std::vector<int64_t> dims;
    for (const Dim& dim : t.dims) dims.push_back(dim.known() ? dim.value : -1);
    dims_.push_back(std::move(dims));
  }
  d.dims = dims_.back().data();
  int32_t idx = static_cast<int32_t>(values_.size());
  values_.push_back(d);
  value_index_[v] = idx;
  return idx;
}

void DescBuilder::AddNode(const Node& n) {
  PendingNode p;
  p.node = &n;
  for (int v : n.inputs) p.inputs.push_back(ValueIndex(v));
  for (int v : n.outputs) p.outputs.push_back(ValueIndex(v));
  p.attr_begin = attrs_.size();
  for (const auto& [name, a] : n.attrs) {
    strata_attribute c{};
    c.struct_size = sizeof(c);
    c.name = Keep(name);
    switch (a.type) {
      case Attribute::Type::kFloat:
        c.type = STRATA_ATTR_FLOAT;
        c.f = a.f;
        break;
      case Attribute::Type::kInt:
        c.type = STRATA_ATTR_INT;
        c.i = a.i;
        break;
      case Attribute::Type::kString:
        c.type = STRATA_ATTR_STRING;
        c.s = Keep(a.s);
        break;
      case Attribute::Type::kFloats:
        c.type = STRATA_ATTR_FLOATS;
        c.count = a.floats.size();
        c.floats = a.floats.data();
        break;
      case Attribute::Type::kInts:
        c.type = STRATA_ATTR_INTS;
        c.count = a.ints.size();
        c.ints = a.ints.data();
        break;
      case Attribute::Type::kStrings: {
        c.type = STRATA_ATTR_STRINGS;
        std::vector<const char*> list;
        for (const auto& s : a.strings) list.push_back(Keep(s));
        string_lists_.push_back(std::move(list));
        c.count = a.strings.size();
        c.strings = string_lists_.back().data();
        break;
      }
      case Attribute::Type::kTensor:
        c.type = STRATA_ATTR_TENSOR;
        c.tensor_dtype = static_cast<int32_t>(a.t.dtype());
        c.tensor_rank = static_cast<uint32_t>(a.t.rank());
        dims_.push_back(ToVector(a.t.shape()));
        c.tensor_dims = dims_.back().data();
        if (a.t.valid() && a.t.dtype() != DataType::kString) {
          c.tensor_data = a.t.raw_data();
          c.tensor_bytes = a.t.byte_size();
        }
        break;
      default:
        // Graph-valued attributes never cross the ABI (see Describable).
        c.type = STRATA_ATTR_UNDEFINED;
        break;
    }
    attrs_.push_back(c);
  }
  p.attr_count = attrs_.size() - p.attr_begin;
  nodes_.push_back(std::move(p));
}

const strata_partition_desc& DescBuilder::Finish(const std::string& name, const std::vector<int>& inputs,
                                                 const std::vector<int>& outputs) {
  part_inputs_.clear();
  part_outputs_.clear();
  for (int v : inputs) part_inputs_.push_back(ValueIndex(v));
  for (int v : outputs) part_outputs_.push_back(ValueIndex(v));
  node_descs_.clear();
  for (const PendingNode& p : nodes_) {
    strata_node_desc d{};
    d.struct_size = sizeof(d);
    d.name = Keep(p.node->name);
    d.op_type = Keep(p.node->op_type);
    d.domain = Keep(p.node->domain);
    d.opset = p.node->opset;
    d.input_count = p.inputs.size();
    d.inputs = p.inputs.data();
    d.output_count = p.outputs.size();
    d.outputs = p.outputs.data();
    d.attribute_count = p.attr_count;
    d.attributes = p.attr_count ? &attrs_[p.attr_begin] : nullptr;
    node_descs_.push_back(d);
  }
  // Values are complete now, so the shared table pointer is stable.
  for (auto& d : node_descs_) {
    d.values = values_.data();
    d.value_count = values_.size();
  }
  part_ = {};
  part_.struct_size = sizeof(part_);
  part_.name = Keep(name);
  part_.values = values_.data();
  part_.value_count = values_.size();
  part_.nodes = node_descs_.data();
  part_.node_count = node_descs_.size();
  part_.inputs = part_inputs_.data();
  part_.input_count = part_inputs_.size();
  part_.outputs = part_outputs_.data();
  part_.output_count = part_outputs_.size();
  part_.option_keys = option_keys_.empty() ? nullptr : option_keys_.data();
  part_.option_values = option_values_.empty() ? nullptr : option_values_.data();
  part_.option_count = option_keys_.size();
  return part_;
}

void DescBuilder::SetOptions(const std::vector<std::pair<std::string, std::string>>& options) {
  option_keys_.clear();
  option_values_.clear();
  for (const auto& [k, v] : options) {
    option_keys_.push_back(Keep(k));
    option_values_.push_back(Keep(v));
  }
}

bool Describable(const Node& n, const Graph& g) {
  for (const auto& [name, a] : n.attrs)
    if (a.type == Attribute::Type::kGraph || a.type == Attribute::Type::kGraphs || a.type == Attribute::Type::kTensors)
      return false;
  auto ok_value = [&](int v) {
    if (v < 0) return true;
    if (const Tensor* c = g.Constant(v)) return c->dtype() != DataType::kString;
    const TypeInfo& t = g.values[v].type;
    // Unknown types are offered too (dtype 0, rank -1): the provider decides and checks at run time.
    return (t.kind == TypeInfo::Kind::kTensor || t.kind == TypeInfo::Kind::kUnknown) &&
           t.elem_type != DataType::kString;
  };
  for (int v : n.inputs)
    if (!ok_value(v)) return false;
  for (int v : n.outputs)
    if (!ok_value(v)) return false;
  return true;
}

}  // namespace strata::plugin
