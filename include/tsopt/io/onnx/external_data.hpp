#pragma once
// ONNX external tensor data: weights kept in a file beside the model, the
// only way to store a model over protobuf's 2 GiB message limit
// (torch.onnx.export writes vit_h_14 and regnet_y_128gf so; so does
// onnx.save_model(..., save_as_external_data=True)).
//
//   reading: the importer copies each external tensor's bytes into its
//            raw_data before anything else looks at it (inline_external_data),
//            from files under the model's directory (external_files) or from
//            memory (external_bytes: a model exported and re-imported in one
//            process);
//   writing: the exporter moves the initializers of a model that would not
//            fit into one data file (outline_initializers).
//
// A location is a relative path inside the model's directory, as ONNX
// Runtime requires: an absolute path or one that climbs out with ".." is
// refused, so a model file cannot make tsopt read arbitrary files.
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "tsopt/io/onnx/proto.hpp"

namespace tsopt::onnx {

// Returns the bytes [offset, offset + length) of the external data named
// `location` (to its end when no length is given); throws tsopt::error
// beginning with `what` when they cannot be had.
using external_reader = std::function<std::string(const std::string& location, std::uint64_t offset,
                                                  std::optional<std::uint64_t> length, const std::string& what)>;

namespace detail {

// The byte count of [offset, offset + length) within `size` bytes of
// `source` (to the end without a length); throws when it does not fit.
inline std::uint64_t external_range(std::uint64_t size, std::uint64_t offset, std::optional<std::uint64_t> length,
                                    const std::string& source, const std::string& what) {
    const std::uint64_t n = length ? *length : (offset <= size ? size - offset : 0);
    if (offset > size || n > size - offset)
        throw error(what + ": " + source + " holds " + std::to_string(size) + " bytes; the tensor needs bytes " +
                    std::to_string(offset) + ".." + std::to_string(offset + n) + " (truncated data file?)");
    return n;
}

}  // namespace detail

// Data files under `directory` (the model's own directory).
inline external_reader external_files(std::filesystem::path directory) {
    return [directory = std::move(directory)](const std::string& location, std::uint64_t offset,
                                             std::optional<std::uint64_t> length, const std::string& what) {
        namespace fs = std::filesystem;
        const fs::path rel(location);
        if (location.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
            throw error(what + ": external data location '" + location + "' is not a relative path inside the model's directory");
        for (const auto& part : rel.lexically_normal())
            if (part == "..")
                throw error(what + ": external data location '" + location + "' leaves the model's directory");
        const fs::path file = directory / rel;
        std::error_code ec;
        if (!fs::is_regular_file(file, ec))
            throw error(what + ": external data file '" + file.string() + "' " +
                        (fs::exists(file, ec) ? "is not a regular file" : "does not exist"));
        const std::uint64_t size = fs::file_size(file, ec);
        if (ec) throw error(what + ": cannot read the size of external data file '" + file.string() + "'");
        const std::uint64_t n = detail::external_range(size, offset, length, "external data file '" + file.string() + "'", what);
        std::ifstream f(file, std::ios::binary);
        std::string bytes(static_cast<std::size_t>(n), '\0');
        if (!f.seekg(static_cast<std::streamoff>(offset)) || !f.read(bytes.data(), static_cast<std::streamsize>(n)))
            throw error(what + ": cannot read " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                        " of external data file '" + file.string() + "'");
        return bytes;
    };
}

// One data file held in memory under the name `location` (which the caller
// keeps alive with `data`).
inline external_reader external_bytes(std::string location, std::string_view data) {
    return [location = std::move(location), data](const std::string& asked, std::uint64_t offset,
                                                  std::optional<std::uint64_t> length, const std::string& what) {
        if (asked != location)
            throw error(what + ": external data location '" + asked + "' is not the data written with the model ('" + location + "')");
        const std::uint64_t n = detail::external_range(data.size(), offset, length, "external data '" + asked + "'", what);
        return std::string(data.substr(offset, n));
    };
}

namespace detail {

inline std::uint64_t external_number(const std::string& value, const char* key, const std::string& what) {
    if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string::npos)
        throw error(what + ": external data " + key + " '" + value + "' is not a non-negative integer");
    return std::stoull(value);
}

inline void inline_tensor(pb::TensorProto& t, const external_reader& read, const std::string& what) {
    if (t.data_location() != pb::TensorProto::EXTERNAL) return;
    std::string location;
    std::uint64_t offset = 0;
    std::optional<std::uint64_t> length;
    for (const auto& kv : t.external_data()) {
        if (kv.key() == "location") location = kv.value();
        else if (kv.key() == "offset") offset = external_number(kv.value(), "offset", what);
        else if (kv.key() == "length") length = external_number(kv.value(), "length", what);
    }
    if (location.empty()) throw error(what + ": external tensor data without a location");
    // The shape bounds the read: a corrupt length cannot allocate more than
    // the tensor needs.
    std::int64_t elements = 1;
    for (std::int64_t d : t.dims()) {
        if (d < 0) throw error(what + ": negative extent " + std::to_string(d));
        if (d > max_elements || (d && elements > max_elements / d))
            throw error(what + ": more than " + std::to_string(max_elements) + " elements");
        elements *= d;
    }
    if (const std::int64_t size = element_size(t.data_type())) {
        const auto want = static_cast<std::uint64_t>(elements * size);
        if (length && *length != want)
            throw error(what + ": external data length " + std::to_string(*length) + " bytes, shape needs " + std::to_string(want));
        length = want;
    }
    std::string bytes = read(location, offset, length, what);
    t.set_raw_data(std::move(bytes));
    t.clear_external_data();
    t.set_data_location(pb::TensorProto::DEFAULT);
}

inline void inline_graph(pb::GraphProto& g, const external_reader& read) {
    for (auto& t : *g.mutable_initializer()) inline_tensor(t, read, "initializer '" + t.name() + "'");
    for (auto& n : *g.mutable_node())
        for (auto& a : *n.mutable_attribute()) {
            const std::string what = "node '" + n.name() + "' (" + n.op_type() + "), attribute '" + a.name() + "'";
            if (a.has_t()) inline_tensor(*a.mutable_t(), read, what);
            for (auto& t : *a.mutable_tensors()) inline_tensor(t, read, what);
            if (a.has_g()) inline_graph(*a.mutable_g(), read);
            for (auto& sub : *a.mutable_graphs()) inline_graph(sub, read);
        }
}

}  // namespace detail

// Every external tensor of `m` (initializers, Constant values, subgraphs)
// gets its bytes as raw_data.
inline void inline_external_data(pb::ModelProto& m, const external_reader& read) {
    if (m.has_graph()) detail::inline_graph(*m.mutable_graph(), read);
}

// Moves every main-graph initializer of at least `min_bytes` into one data
// file named `location` and returns its bytes. Tensors start at 64-byte
// boundaries, so a reader mapping the file gets aligned weights.
inline std::string outline_initializers(pb::ModelProto& m, const std::string& location, std::size_t min_bytes = 1024) {
    std::string data;
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
        if (!t.has_raw_data() || t.raw_data().size() < min_bytes) continue;
        data.resize((data.size() + 63) / 64 * 64, '\0');
        const std::size_t offset = data.size();
        data += t.raw_data();
        std::string().swap(*t.mutable_raw_data());  // frees the bytes now, not when the arena goes
        t.clear_raw_data();
        t.set_data_location(pb::TensorProto::EXTERNAL);
        auto entry = [&](const char* key, std::string value) {
            auto* kv = t.add_external_data();
            kv->set_key(key);
            kv->set_value(std::move(value));
        };
        entry("location", location);
        entry("offset", std::to_string(offset));
        entry("length", std::to_string(data.size() - offset));
    }
    return data;
}

}  // namespace tsopt::onnx
