#pragma once
// The model zoo: the networks the TASO / MetaFlow / PET evaluations use, as
// graph builders over tsopt's declared operators. Each builder takes
// zoo::options (batch, image size, width and depth divisors, sequence
// length, seed) so tests can build small variants and benchmarks full-size
// ones; every graph is validated before it is returned.
//
//   auto g = tsopt::zoo::build("resnet50");                       // paper size
//   auto s = tsopt::zoo::build("resnet50", {.image = 32, .width_div = 16});
//   for (auto& m : tsopt::zoo::models()) ... m.name, m.build(opts)
#include <span>
#include <string_view>

#include "tsopt/zoo/bert.hpp"
#include "tsopt/zoo/csrnet.hpp"
#include "tsopt/zoo/inception_v3.hpp"
#include "tsopt/zoo/nasnet_a.hpp"
#include "tsopt/zoo/nasnet_mobile.hpp"
#include "tsopt/zoo/nasrnn.hpp"
#include "tsopt/zoo/resnet.hpp"
#include "tsopt/zoo/resnext50.hpp"
#include "tsopt/zoo/rnntc.hpp"
#include "tsopt/zoo/squeezenet.hpp"

namespace tsopt::zoo {

struct model {
    std::string_view name;
    std::string_view summary;
    graph (*build)(const options&);
};

inline constexpr model registry[] = {
    {"resnet18", "ResNet-18, 224x224 -> [N,1000]", resnet18},
    {"resnet50", "ResNet-50 (v1.5), 224x224 -> [N,1000]", resnet50},
    {"resnext50", "ResNeXt-50 32x4d, 224x224 -> [N,1000]", resnext50},
    {"inception_v3", "Inception-v3 (no aux head), 299x299 -> [N,1000]", inception_v3},
    {"squeezenet", "SqueezeNet v1.0, 227x227 -> [N,1000]", squeezenet},
    {"nasnet_a", "NasNet-A cells as in TASO, [N,128,56,56] -> [N,5120,7,7]", nasnet_a},
    {"nasnet_mobile", "NASNet-A Mobile 4@1056, 224x224 -> [N,1000]", nasnet_mobile},
    {"nasrnn", "NAS RNN cell, hidden 512, 5 steps -> [N,512]", nasrnn},
    {"bert", "BERT encoder, 8 layers, seq 64, hidden 1024, 16 heads -> [N*64,1024]", bert},
    {"rnntc", "SRU text classifier, 4 layers, hidden 1024, 32 tokens -> [N,2]", rnntc},
    {"csrnet", "CSRNet (dilated VGG), 224x224 -> [N,1,28,28]", csrnet},
};

inline std::span<const model> models() { return registry; }

// The model called `name`; throws tsopt::error listing the known names.
inline const model& find(std::string_view name) {
    for (const model& m : registry)
        if (m.name == name) return m;
    std::string known;
    for (const model& m : registry) known += (known.empty() ? "" : ", ") + std::string(m.name);
    throw error("zoo: no model called '" + std::string(name) + "' (known: " + known + ")");
}

inline graph build(std::string_view name, const options& o = {}) { return find(name).build(o); }

}  // namespace tsopt::zoo
