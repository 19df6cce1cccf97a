// The layers point one way (docs/ARCHITECTURE.md): a table of which folder of src/ may include
// which, over every folder, checked against every #include "<folder>/..." in src/. Lower layers
// first: core; precision; backend (kernels and a runtime: no model, training or optimizer logic);
// model (written once over the op interface: it sees backend/'s interface headers, never a
// concrete backend under backend/cpu, cuda or nocuda); optim; dist; io (files: no model, data or
// training); data; eval; train; hf (the Hugging Face conversions, above training: they read and
// write its checkpoints); report; bench; cli. A new folder, or an include the table does not
// allow, fails here naming the file.
//
// Inside a folder the rule is at the level of files: a file (its .h and .cpp as one) may include
// the folder's other files only where that makes no cycle. Checked for the folders in
// kAcyclicFolders (train/, whose loop, tasks, checkpoints and guards once included each other
// round in circles); a cycle fails naming its files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Folder → the folders its files may include (besides itself).
const std::map<std::string, std::set<std::string>>& rules() {
  static const std::map<std::string, std::set<std::string>> table = [] {
    std::map<std::string, std::set<std::string>> t;
    t["core"] = {};
    t["precision"] = {"core"};
    t["backend"] = {"core", "precision"};
    t["model"] = {"core", "precision", "backend"};
    t["optim"] = {"core", "precision", "backend", "model"};
    t["dist"] = {"core", "precision", "backend", "model", "optim"};
    t["io"] = {"core"};
    t["data"] = {"core", "io"};
    t["eval"] = {"core", "precision", "backend", "model", "optim", "dist", "io", "data"};
    t["train"] = {"core", "precision", "backend", "model", "optim", "dist", "io", "data", "eval"};
    t["hf"] = {"core", "precision", "backend", "model", "optim", "io", "data", "train"};
    t["report"] = {"core", "io", "train"};
    t["bench"] = {"core", "precision", "backend", "model", "optim", "dist", "io", "data", "eval", "train"};
    t["cli"] = {"core", "precision", "backend", "model", "optim", "dist", "io", "data", "eval",
                "train", "hf", "report", "bench"};
    return t;
  }();
  return table;
}

// Besides the table: model/ reaches the backend only through its interface headers.
bool concrete_backend(const std::string& path) { return std::regex_search(path, std::regex("^backend/(cpu|cuda|nocuda)/")); }

// "src/<folder>/f.cpp includes <target>" for every include the rules forbid, under root/src.
std::set<std::string> violations(const fs::path& root) {
  const std::regex include("^\\s*#\\s*include\\s*\"(([a-z_]+)/[^\"]*)\"");
  std::set<std::string> found;
  for (const auto& folder : fs::directory_iterator(root / "src")) {
    if (!folder.is_directory()) continue;
    const std::string name = folder.path().filename().string();
    const auto rule = rules().find(name);
    if (rule == rules().end()) {
      found.insert("src/" + name + "/ has no row in the layering table");
      continue;
    }
    for (const auto& e : fs::recursive_directory_iterator(folder.path())) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path());
      std::string line;
      std::smatch m;
      while (std::getline(in, line)) {
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = m[2].str(), path = m[1].str();
        if (!rules().count(target)) continue;  // a system or third-party header
        const bool allowed = target == name || rule->second.count(target);
        if (!allowed || (name == "model" && concrete_backend(path)))
          found.insert(fs::relative(e.path(), root).generic_string() + " includes " + path);
      }
    }
  }
  return found;
}

// The folders whose files include each other without a cycle.
const std::set<std::string> kAcyclicFolders = {"train"};

// Folder `name`'s files as a graph: each file's stem (path under the folder without its
// extension, so x.h and x.cpp are one node) → the stems of the folder it includes.
std::map<std::string, std::set<std::string>> file_graph(const fs::path& folder) {
  const std::string name = folder.filename().string();
  const std::regex include("^\\s*#\\s*include\\s*\"" + name + "/([^\"]*)\"");
  std::map<std::string, std::set<std::string>> g;
  for (const auto& e : fs::recursive_directory_iterator(folder)) {
    if (!e.is_regular_file()) continue;
    const std::string stem = fs::relative(e.path(), folder).replace_extension().generic_string();
    g[stem];
    std::ifstream in(e.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, include)) {
        const std::string target = fs::path(m[1].str()).replace_extension().generic_string();
        if (target != stem) g[stem].insert(target);
      }
  }
  return g;
}

// Every cycle of the graph as "a -> b -> a" (one per strongly connected component of two or more
// files: Tarjan's algorithm), sorted.
std::set<std::string> cycles(const std::map<std::string, std::set<std::string>>& g) {
  std::map<std::string, int> index, low;
  std::vector<std::string> stack;
  std::set<std::string> on, found;
  int next = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on.insert(v);
    const auto it = g.find(v);
    if (it != g.end())
      for (const std::string& w : it->second) {
        if (!index.count(w)) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on.count(w)) {
          low[v] = std::min(low[v], index[w]);
        }
      }
    if (low[v] != index[v]) return;
    std::vector<std::string> component;
    for (std::string w = ""; w != v;) {
      w = stack.back();
      stack.pop_back();
      on.erase(w);
      component.push_back(w);
    }
    if (component.size() < 2) return;
    std::sort(component.begin(), component.end());
    std::string text;
    for (const std::string& c : component) text += c + " -> ";
    found.insert(text + component.front());
  };
  for (const auto& [v, targets] : g)
    if (!index.count(v)) visit(v);
  return found;
}

TEST(Layering, EveryFolderIncludesOnlyTheFoldersBelowIt) {
  const fs::path root(MPTRAIN_SOURCE_DIR);
  ASSERT_TRUE(fs::exists(root / "src")) << "no src/ under " << MPTRAIN_SOURCE_DIR;
  for (const std::string& v : violations(root)) ADD_FAILURE() << v << " (tests/backend/test_layering.cpp's table)";
}

TEST(Layering, FilesOfAnAcyclicFolderIncludeEachOtherWithoutACycle) {
  const fs::path root(MPTRAIN_SOURCE_DIR);
  for (const std::string& folder : kAcyclicFolders)
    for (const std::string& c : cycles(file_graph(root / "src" / folder)))
      ADD_FAILURE() << "src/" << folder << "/ has an include cycle: " << c;
}

// The cycle scan sees a planted cycle (.h and .cpp as one file), and not a chain.
TEST(Layering, TheCycleScanSeesAPlantedCycle) {
  const fs::path root = fs::temp_directory_path() / ("mptrain_cycles_" + std::to_string(::getpid()));
  fs::create_directories(root / "train");
  std::ofstream(root / "train/a.h") << "#include \"train/b.h\"\n";
  std::ofstream(root / "train/a.cpp") << "#include \"train/a.h\"\n";
  std::ofstream(root / "train/b.h") << "#include <vector>\n";
  std::ofstream(root / "train/b.cpp") << "#include \"train/c.h\"\n";
  std::ofstream(root / "train/c.cpp") << "#include \"train/a.h\"\n";
  std::ofstream(root / "train/d.h") << "#include \"train/a.h\"\n";
  const std::set<std::string> found = cycles(file_graph(root / "train"));
  fs::remove_all(root);
  EXPECT_EQ(found, (std::set<std::string>{"a -> b -> c -> a"}));
}

// The scan finds a planted upward include, a concrete backend in model/, and an unknown folder
// (so that an empty result means something).
TEST(Layering, TheScanSeesAPlantedUpwardInclude) {
  const fs::path root = fs::temp_directory_path() / ("mptrain_layering_" + std::to_string(::getpid()));
  fs::create_directories(root / "src/backend/cpu");
  fs::create_directories(root / "src/model");
  fs::create_directories(root / "src/io");
  fs::create_directories(root / "src/newthing");
  std::ofstream(root / "src/backend/cpu/clean.cpp") << "#include \"core/dtype.h\"\n#include <vector>\n";
  std::ofstream(root / "src/backend/cpu/bad.cpp") << "// note\n  #  include \"optim/adamw.h\"\n";
  std::ofstream(root / "src/model/fine.cpp") << "#include \"backend/backend.h\"\n";
  std::ofstream(root / "src/model/concrete.cpp") << "#include \"backend/cpu/cpu_backend.h\"\n";
  std::ofstream(root / "src/io/up.cpp") << "#include \"train/checkpoint.h\"\n";
  const std::set<std::string> found = violations(root);
  fs::remove_all(root);
  EXPECT_EQ(found, (std::set<std::string>{"src/backend/cpu/bad.cpp includes optim/adamw.h",
                                          "src/io/up.cpp includes train/checkpoint.h",
                                          "src/model/concrete.cpp includes backend/cpu/cpu_backend.h",
                                          "src/newthing/ has no row in the layering table"}));
}

}  // namespace
