// Writes tsopt's zoo models (the TASO / MetaFlow / PET evaluation networks,
// paper size, batch 1, seeded random weights) as ONNX files, so
// bench/vs_runtimes.sh can run them in ONNX Runtime and OpenVINO beside
// tsopt:
//   export_zoo DIR [NAME,...]   ->  DIR/zoo_<name>.onnx (an existing file is kept)
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tsopt/onnx.hpp"
#include "tsopt/zoo/zoo.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) try {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: export_zoo DIR [NAME,...]\n";
        return 2;
    }
    const fs::path dir = argv[1];
    std::vector<std::string> names;
    if (argc == 3) {
        std::stringstream list(argv[2]);
        for (std::string n; std::getline(list, n, ',');) {
            tsopt::zoo::find(n);  // an unknown name is an error listing the known ones
            names.push_back(n);
        }
    } else {
        for (const auto& m : tsopt::zoo::models()) names.emplace_back(m.name);
    }
    fs::create_directories(dir);
    for (const auto& name : names) {
        const fs::path out = dir / ("zoo_" + name + ".onnx");
        if (fs::exists(out)) {
            std::cout << out.string() << ": exists, kept\n";
            continue;
        }
        tsopt::graph g = tsopt::zoo::build(name, {.batch = 1});
        tsopt::onnx::save(g, out.string(), {.opset = 17, .graph_name = "tsopt_zoo_" + name});
        std::cout << out.string() << ": " << tsopt::zoo::find(name).summary << ", " << g.op_count() << " operators\n";
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "export_zoo: " << e.what() << "\n";
    return 1;
}
