// The engine's operators and axioms as a plugin of the `tsopt` command
// (`tsopt optimize M.onnx --plugin libmyengine_plugin.so --rules
// myengine_rules.txt`): plugin_test.sh.
#include <tsopt/plugin.hpp>

#include "myengine_ops.hpp"

TSOPT_PLUGIN([](const tsopt::plugin_host& host) {
    host.register_operator(myengine::neg_decl);
    host.register_operator(myengine::sub_decl);
    host.register_axioms(myengine::axioms);
})
