// Fuzz target for the ONNX importer: any byte string either imports (and then
// exports and re-imports) or fails with tsopt::error; anything else — a
// crash, another exception, a leak, a hang — is a bug.
//
// Built with clang's libFuzzer (-fsanitize=fuzzer,address,undefined) when
// clang++ is available (TSOPT_LIBFUZZER defined); otherwise with the
// project's compiler, ASan, and the bounded mutation loop in main() below.
#include <cstdint>
#include <string_view>

#include "tsopt/onnx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tsopt::onnx::model m;
    try {
        m = tsopt::onnx::import_model(std::string_view(reinterpret_cast<const char*>(data), size), {.batch = 2});
    } catch (const tsopt::error&) {
        return 0;
    }
    // What imports must export, and the export must import again with the same interface.
    std::string bytes = tsopt::onnx::to_bytes(m.graph, tsopt::onnx::options_for(m));
    auto again = tsopt::onnx::import_model(bytes);
    if (again.graph.inputs().size() != m.graph.inputs().size() || again.graph.outputs.size() != m.graph.outputs.size())
        __builtin_trap();
    return 0;
}

#ifndef TSOPT_LIBFUZZER
// Fallback driver: runs every file given (or in given directories), then
// random byte-level mutations of them until -max_total_time=SECONDS passes.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

int main(int argc, char** argv) {
    double seconds = 60;
    std::vector<std::string> seeds;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("-max_total_time=", 0) == 0) seconds = std::stod(a.substr(16));
        else if (a[0] == '-') continue;  // other libFuzzer flags
        else if (std::filesystem::is_directory(a)) {
            for (auto& e : std::filesystem::directory_iterator(a)) {
                std::ifstream f(e.path(), std::ios::binary);
                std::ostringstream s;
                s << f.rdbuf();
                seeds.push_back(s.str());
            }
        }
    }
    if (seeds.empty()) seeds.push_back({});
    for (auto& s : seeds) LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
    std::mt19937_64 rng(1);
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    long runs = 0;
    while (std::chrono::steady_clock::now() < end) {
        std::string s = seeds[rng() % seeds.size()];
        int edits = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < edits && !s.empty(); ++k) {
            std::size_t at = rng() % s.size();
            switch (rng() % 4) {
                case 0: s[at] = static_cast<char>(rng()); break;                    // flip a byte
                case 1: s.erase(at, 1 + rng() % 16); break;                          // cut
                case 2: s.insert(at, 1, static_cast<char>(rng())); break;            // insert
                case 3: s.resize(at); break;                                          // truncate
            }
        }
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
        ++runs;
    }
    std::cout << "fuzz_import: " << runs << " mutated inputs, " << seeds.size() << " seeds, no failure\n";
    return 0;
}
#endif
