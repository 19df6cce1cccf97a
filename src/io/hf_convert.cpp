// Hugging Face folders ⇄ mptrain checkpoints (see hf_convert.h).
#include "io/hf_convert.h"

#include <unistd.h>

#include <filesystem>
#include <utility>

#include "core/error.h"
#include "data/gpt2_tokenizer.h"
#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "io/hf_folder.h"
#include "io/hf_gpt2.h"
#include "io/safetensors.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

constexpr int kGpt2Vocab = 50257;  // the vocabulary of GPT-2's encoder.json

// An output folder built under a hidden sibling name and renamed into place by commit();
// removed again if commit() is never reached.
class StagedDir {
 public:
  explicit StagedDir(const std::string& out) {
    fs::path p(out);
    if (!p.has_filename()) p = p.parent_path();  // "dir/" → "dir"
    MPT_CHECK(!p.empty(), "no output folder given");
    final_ = p;
    std::error_code ec;
    if (fs::exists(final_, ec)) {
      MPT_CHECK(fs::is_directory(final_, ec), "output '" + out + "' exists and is not a folder");
      MPT_CHECK(fs::is_empty(final_, ec),
                "output folder '" + out + "' exists and is not empty; choose a new one");
    }
    const fs::path parent = final_.has_parent_path() ? final_.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec) throw Error("cannot create '" + parent.string() + "': " + ec.message());
    staging_ = parent / ("." + final_.filename().string() + ".partial." + std::to_string(::getpid()));
    fs::remove_all(staging_, ec);
    fs::create_directory(staging_, ec);
    if (ec) throw Error("cannot create '" + staging_.string() + "': " + ec.message());
  }
  ~StagedDir() {
    std::error_code ec;
    if (!committed_) fs::remove_all(staging_, ec);
  }
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  std::string path() const { return staging_.string(); }

  void commit() {
    fsync_dir(staging_.string());
    std::error_code ec;
    fs::rename(staging_, final_, ec);  // replaces an empty folder of that name
    if (ec)
      throw Error("cannot rename '" + staging_.string() + "' to '" + final_.string() + "': " + ec.message());
    committed_ = true;
    fsync_dir(final_.has_parent_path() ? final_.parent_path().string() : ".");
  }

 private:
  fs::path final_, staging_;
  bool committed_ = false;
};

std::string model_file_of(const std::string& hf_dir) {
  const std::string path = hf_dir + "/" + kHfModelFile;
  if (fs::exists(path)) return path;
  if (fs::exists(hf_dir + "/model.safetensors.index.json"))
    throw Error("'" + hf_dir +
                "' holds a sharded model (model.safetensors.index.json); only a single model.safetensors "
                "can be imported");
  if (fs::exists(hf_dir + "/pytorch_model.bin"))
    throw Error("'" + hf_dir +
                "' holds pytorch_model.bin but no model.safetensors; save the model with "
                "safe_serialization=True (the default in recent transformers) and convert that");
  throw Error("'" + path +
              "' not found: a Hugging Face model folder holds config.json and model.safetensors");
}

HfImportResult import_gpt2(const nlohmann::json& cfg, const std::string& hf_dir, const std::string& out_dir,
                           int vocab_multiple) {
  HfImportResult r;
  r.model_type = "gpt2";
  r.config = gpt2_config_from_hf(cfg, "'" + hf_dir + "/" + kHfConfigFile + "'", vocab_multiple);
  SafetensorsFile file(model_file_of(hf_dir));
  const ParamTable table = gpt2_param_table(r.config);
  std::vector<float> params(table.total());
  const HfLoadReport report = load_hf_params(file, gpt2_hf_name_map(), table, params.data());
  r.ignored = report.ignored;
  r.tied_copies = report.tied_copies;
  r.dtypes = report.dtypes;
  for (const auto& spec : table.specs()) r.num_params += spec.hf_numel();

  StagedDir out(out_dir);
  TrainState state;  // step 0, data position at the start
  state.options = {{"imported_from", fs::absolute(hf_dir).lexically_normal().string()}};
  save_weights_checkpoint(out.path(), r.config, table, params.data(), state);
  out.commit();
  return r;
}

}  // namespace

HfImportResult import_hf_folder(const std::string& hf_dir, const std::string& out_dir, int vocab_multiple) {
  MPT_CHECK(fs::is_directory(hf_dir),
            "'" + hf_dir + "' is not a folder (expected a Hugging Face model folder)");
  const nlohmann::json cfg = read_hf_config(hf_dir);
  const std::string what = "'" + hf_dir + "/" + kHfConfigFile + "'";
  const std::string type = hf_config_string(cfg, "model_type", "gpt2", what);
  if (type == "gpt2") return import_gpt2(cfg, hf_dir, out_dir, vocab_multiple);
  throw Error(what + ": model_type '" + type + "' cannot be imported (supported: gpt2)");
}

HfExportResult export_hf_folder(const std::string& ckpt_or_run_dir, const std::string& out_dir,
                                const std::string& vocab_dir) {
  HfExportResult r;
  r.checkpoint = resolve_checkpoint(ckpt_or_run_dir);
  r.config = load_checkpoint_config(r.checkpoint);
  const ParamTable table = gpt2_param_table(r.config);
  SafetensorsFile file(r.checkpoint + "/" + kCheckpointModelFile);

  // hf_shape drops wte's padded rows; checkpoints already store it that way, but reading
  // through hf_read_f32 keeps export working whatever dtype a checkpoint stores.
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const auto& spec : table.specs()) offsets.push_back(std::exchange(total, total + spec.hf_numel()));
  std::vector<float> values(total);
  SafetensorsWriter weights;
  for (size_t i = 0; i < table.specs().size(); ++i) {
    const ParamSpec& spec = table.specs()[i];
    hf_read_f32(file, file.get(spec.name), spec.hf_shape, values.data() + offsets[i]);
    weights.add(spec.name, DType::F32, spec.hf_shape, values.data() + offsets[i]);
  }
  weights.set_metadata("format", "pt");
  r.num_params = total;

  // GPT-2's tokenizer files, under the names Hugging Face's GPT2Tokenizer reads.
  std::string vocab;
  if (r.config.vocab_size == kGpt2Vocab) {
    if (!vocab_dir.empty()) {
      vocab = find_vocab_dir(vocab_dir, nullptr);
    } else {
      try {
        vocab = find_vocab_dir("", nullptr);
      } catch (const Error&) {
        vocab.clear();  // not installed: the folder still loads as a model
      }
    }
  }

  StagedDir out(out_dir);
  weights.write(out.path() + "/" + kHfModelFile);
  write_file_atomic(out.path() + "/" + kHfConfigFile, hf_gpt2_config(r.config).dump(2) + "\n");
  if (!vocab.empty()) {
    write_file_atomic(out.path() + "/vocab.json", read_file(vocab + "/encoder.json"));
    write_file_atomic(out.path() + "/merges.txt", read_file(vocab + "/vocab.bpe"));
    r.tokenizer_files = true;
  }
  out.commit();
  return r;
}

}  // namespace mptrain
