// Placeholder entry point; the real CLI lands with the graph/executor.
#include <cstdio>
int main() { std::puts("crest"); return 0; }
