// nasnet_mobile: build, optimize with measured oneDNN costs, verify on the board, report (examples/driver.cpp).
#include "common.hpp"

int main(int argc, char** argv) { return tsopt::examples::run("nasnet_mobile", argc, argv); }
