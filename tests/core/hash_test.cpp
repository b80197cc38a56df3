// core/hash.hpp, the one hash: FNV-1a gives the published test vectors (so
// the file names and keys built from it are what any FNV-1a gives), framing
// keeps concatenations apart, and the graph hashes built from it see weight
// values (content) or weight objects (address) as documented.
#include <doctest/doctest.h>

#include "tsopt/core/graph.hpp"
#include "tsopt/core/hash.hpp"

using namespace tsopt;

TEST_CASE("FNV-1a 64 gives the published test vectors") {
    // From the FNV reference (Fowler, Noll, Vo): "" is the offset basis.
    CHECK(hashing::fnv1a_of("") == 0xcbf29ce484222325ull);
    CHECK(hashing::fnv1a_of("a") == 0xaf63dc4c8601ec8cull);
    CHECK(hashing::fnv1a_of("foobar") == 0x85944171f73967e8ull);
    CHECK(hashing::fnv1a{}.bytes("foobar", 6).value == hashing::fnv1a_of("foobar"));
    static_assert(hashing::fnv1a_of("a") == 0xaf63dc4c8601ec8cull, "usable in constant expressions");
}

TEST_CASE("framed text and numbers keep concatenations apart") {
    CHECK(hashing::fnv1a{}.text("ab").text("c").value != hashing::fnv1a{}.text("a").text("bc").value);
    CHECK(hashing::fnv1a{}.number(1).number(2).value != hashing::fnv1a{}.number(2).number(1).value);
    CHECK(hashing::combine(1, 2) != hashing::combine(2, 1));
    CHECK(hashing::mix64(0) != hashing::mix64(1));
    CHECK(hashing::hex(0xabcull, 4) == "0abc");
    CHECK(hashing::hex(0xcbf29ce484222325ull) == "cbf29ce484222325");
}

TEST_CASE("graph hashes: weights by content are equal across copies, by address they are not") {
    auto build = [](float w0) {
        graph g;
        value x = g.input("x", shape{1, 4});
        tensor<float> t(shape{4, 4});
        for (std::int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i);
        t[0] = w0;
        g.mark_output(g.matmul(x, g.weight("w", std::move(t))));
        return g;
    };
    graph a = build(0.f), b = build(0.f), c = build(1.f);
    CHECK(a.hash_of_outputs(graph::weights_by::content) == b.hash_of_outputs(graph::weights_by::content));
    CHECK(a.hash_of_outputs(graph::weights_by::content) != c.hash_of_outputs(graph::weights_by::content));
    CHECK(a.structural_hash() != b.structural_hash());  // two weight objects
    CHECK(a.structural_hash() == a.structural_hash());
    // Per node: the input and the weight's node of a and b agree by content.
    auto ha = a.node_hashes(graph::weights_by::content), hb = b.node_hashes(graph::weights_by::content);
    CHECK(ha == hb);
}
