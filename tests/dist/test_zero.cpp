// ZeRO-1's sharded optimizer, without MPI: the ranks' shard optimizers are simulated one after
// another in this process and must reproduce the whole-table optimizer bit for bit (updates
// are elementwise, so only wrong bookkeeping at a shard's cut — a lost weight-decay flag, a
// shifted offset, padding counted as real — could make them differ).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/host_backend.h"
#include "core/error.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "model/gpt2.h"
#include "optim/make_optimizer.h"

namespace mptrain {
namespace {

// A small GPT-2 table with a padded vocabulary (V = 300 → Vp = 384), so that shards cut through
// wte's padding, biases (no decay) and weights (decay).
ParamTable small_table() {
  Gpt2Config c = gpt2_preset("d2", 128);
  c.vocab_size = 300;
  c.padded_vocab_size = pad_vocab(300, 128);
  c.block_size = 64;
  return gpt2_param_table(c);
}

std::vector<float> random_values(size_t n, uint64_t stream, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (static_cast<float>(uniform01(11, stream, i)) - 0.5f) * scale;
  return v;
}

TEST(ShardTable, KeepsNamesDecayFlagsAndRealLengthsAtTheCuts) {
  const ParamTable table = small_table();
  const ParamSpec& wte = table.get("wte.weight");
  ASSERT_LT(wte.hf_numel(), wte.numel);  // padded
  // A shard from the middle of wte's real rows into its padding and on into wpe.
  const size_t begin = wte.hf_numel() - 100, end = wte.offset + wte.numel + 50;
  const ParamTable shard = shard_param_table(table, begin, end);
  ASSERT_EQ(shard.specs().size(), 2u);
  EXPECT_EQ(shard.total(), end - begin);
  const ParamSpec& a = shard.specs()[0];
  EXPECT_EQ(a.name, "wte.weight");
  EXPECT_EQ(a.decay, wte.decay);
  EXPECT_EQ(a.numel, wte.numel - (begin - wte.offset));
  EXPECT_EQ(a.hf_numel(), 100u);  // only the real elements count as real
  const ParamSpec& b = shard.specs()[1];
  EXPECT_EQ(b.name, "wpe.weight");
  EXPECT_EQ(b.offset, a.numel);
  EXPECT_EQ(b.numel, 50u);
  EXPECT_EQ(b.hf_numel(), 50u);
  EXPECT_EQ(shard_param_table(table, 0, table.total()).total(), table.total());
  EXPECT_EQ(shard_param_table(table, 7, 7).specs().size(), 0u);
  EXPECT_THROW(shard_param_table(table, 5, table.total() + 1), Error);
}

// Runs `steps` updates of the whole-table optimizer and of `world` shard optimizers over the
// same gradients; parameters, per-parameter state and (Sophia) win rates must agree exactly.
void check_sharded_matches_whole(OptimizerKind kind, int world) {
  SCOPED_TRACE(std::string(optimizer_name(kind)) + ", world " + std::to_string(world));
  const ParamTable table = small_table();
  const size_t n = table.total();
  AdamWHyper adamw;
  adamw.weight_decay = 0.1f;
  SophiaHyper sophia;
  sophia.k = 2;
  MuonHyper muon;
  muon.qkv = MuonQkv::Three;
  auto make = [&](const ParamTable& t) {
    return make_optimizer(kind, t, adamw, sophia, 4096.0, 3, host_backend(), muon);
  };

  std::vector<float> whole_params = random_values(n, 1, 0.2f);
  std::vector<float> shard_params = whole_params;
  auto whole = make(table);
  // Muon's shards hold whole matrices (DataParallel cuts them so).
  std::vector<std::pair<size_t, size_t>> whole_ranges;
  if (kind == OptimizerKind::Muon)
    for (const ParamRange& r : muon_whole_ranges(table, muon.qkv)) whole_ranges.emplace_back(r.begin, r.end);
  const Partition part = partition_keeping_whole(n, world, whole_ranges);
  std::vector<ParamTable> tables;
  std::vector<std::unique_ptr<Optimizer>> shards;
  tables.reserve(world);
  for (int r = 0; r < world; ++r) tables.push_back(shard_param_table(table, part.begin(r), part.end(r)));
  for (int r = 0; r < world; ++r) shards.push_back(make(tables[r]));

  for (int64_t t = 1; t <= 4; ++t) {
    std::vector<float> g = random_values(n, 100 + t, 0.05f);
    whole->step(whole_params.data(), g.data(), 1e-2f, t);
    for (int r = 0; r < world; ++r)
      shards[r]->step(shard_params.data() + part.begin(r), g.data() + part.begin(r), 1e-2f, t);
    if (whole->curvature_due(t)) {
      std::vector<float> h = random_values(n, 200 + t, 0.05f);
      const double whole_rate = whole->update_curvature(h.data());
      // The global rate from the shards' rates, weighted by their real coordinates, as
      // DataParallel::global_fraction combines them.
      double weighted = 0.0, real = 0.0;
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(shards[r]->curvature_due(t));
        double count = 0.0;
        for (const auto& spec : tables[r].specs()) count += static_cast<double>(spec.hf_numel());
        weighted += shards[r]->update_curvature(h.data() + part.begin(r)) * count;
        real += count;
      }
      EXPECT_NEAR(weighted / real, whole_rate, 1e-12);
    }
  }
  ASSERT_EQ(whole_params, shard_params);
  for (size_t k = 0; k < whole->state().size(); ++k)
    for (int r = 0; r < world; ++r) {
      const float* w = whole->state()[k].buffer.data() + part.begin(r);
      const float* s = shards[r]->state()[k].buffer.data();
      for (size_t i = 0; i < part.count(r); ++i)
        ASSERT_EQ(w[i], s[i]) << whole->state()[k].prefix << " at " << part.begin(r) + i;
    }
}

TEST(ZeroShards, AdamWShardsMatchTheWholeOptimizer) {
  for (int world : {1, 2, 3, 7}) check_sharded_matches_whole(OptimizerKind::AdamW, world);
}

TEST(ZeroShards, SophiaShardsMatchTheWholeOptimizer) {
  for (int world : {2, 5}) check_sharded_matches_whole(OptimizerKind::Sophia, world);
}

TEST(ZeroShards, MuonShardsOfWholeMatricesMatchTheWholeOptimizer) {
  for (int world : {2, 3, 5}) check_sharded_matches_whole(OptimizerKind::Muon, world);
}

TEST(ZeroShards, MuonRefusesAShardThatCutsAMatrix) {
  const ParamTable table = small_table();
  const ParamSpec& fc = table.get("h.0.mlp.c_fc.weight");
  const ParamTable cut = shard_param_table(table, 0, fc.offset + 10);
  try {
    make_optimizer(OptimizerKind::Muon, cut, {}, {}, 1.0, 1, host_backend());
    FAIL() << "a cut matrix was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h.0.mlp.c_fc.weight is cut by this rank's shard"),
              std::string::npos)
        << e.what();
  }
}

TEST(DataParallel, SingleProcessCoversTheWholeBufferAndScattersState) {
  auto comm = make_single_communicator();
  const ParamTable table = small_table();
  for (ZeroStage zero : {ZeroStage::Off, ZeroStage::One}) {
    DataParallel dp(*comm, table, zero);
    EXPECT_EQ(dp.begin(), 0u);
    EXPECT_EQ(dp.end(), table.total());
    EXPECT_EQ(dp.optimizer_table().total(), table.total());
    auto make = [](const ParamTable& t) {
      return make_optimizer(OptimizerKind::AdamW, t, {}, {}, 1.0, 1, host_backend());
    };
    auto local = make(dp.optimizer_table());
    auto whole = make(table);
    for (auto& st : whole->state())
      for (size_t i = 0; i < st.buffer.size(); ++i) st.buffer[i] = static_cast<float>(i % 5);
    dp.scatter_optimizer(*whole, *local);
    EXPECT_EQ(local->state()[1].buffer[12], 2.0f);
    auto gathered = dp.gather_optimizer(*local, make);
    if (zero == ZeroStage::Off) {
      EXPECT_EQ(gathered, nullptr);  // already whole
    } else {
      ASSERT_NE(gathered, nullptr);
      EXPECT_EQ(gathered->state()[0].buffer[13], 3.0f);
    }
  }
  EXPECT_EQ(zero_stage_from_int(2), ZeroStage::Two);
  EXPECT_THROW(zero_stage_from_int(3), Error);
  // ZeRO-2 shards the gradients: one process has no one to shard them with.
  EXPECT_THROW(DataParallel(*comm, table, ZeroStage::Two), Error);
}

}  // namespace
}  // namespace mptrain
