// `mptrain prepare --task bert` as a library: text -> documents -> sentences ->
// WordPiece ids -> sentence-pair instances as google-research/bert's
// create_pretraining_data.py builds them -> instance files (data/bert_instances.h).
//
// Outputs in out_dir: <name>_train.bert, <name>_val.bert (absent when val_fraction is
// 0) and <name>_vocab.txt (the vocabulary the ids index; also embedded in each file).
// Without a vocabulary (vocab_path empty) one of vocab_size tokens is trained on the
// training documents first (data/wordpiece_trainer.h). docs/DATA.md has the details.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress.h"
#include "data/bert_instances.h"
#include "data/wordpiece.h"

namespace mptrain {

// Sentences of one document (see the .cpp for the rules: paragraphs at blank lines,
// lines joined, a cut after . ! ? (and closing quotes/brackets) before a character that
// is not a lower-case letter, except after common abbreviations and single-letter
// initials; a line starting with "--" (an attribution) starts a sentence).
std::vector<std::string> split_sentences(std::string_view document);

enum class NspRule {
  kBalanced,  // a chunk of one segment makes no instance (see bert_prepare.cpp), so
              // IsNext/NotNext follow the 50% coin on any corpus
  kGoogle,    // exactly create_pretraining_data.py: a one-segment chunk is always NotNext
};

struct BertPrepareOptions {
  std::vector<std::string> inputs, excludes;  // as for the GPT-2 prepare (data/prepare.h)
  std::string doc_delimiter;
  std::string exclude_docs;  // a held-out list (data/topic_task.h) whose texts are left out
  std::string out_dir;
  std::string name;        // file prefix; empty: the last component of out_dir
  std::string vocab_path;  // an existing vocab.txt; empty: train one
  int vocab_size = 8192;   // when training
  bool lower_case = true;  // uncased (and accents stripped), as bert-base-uncased
  int max_seq_len = 128;
  double short_seq_prob = 0.1;
  int dupe_factor = 5;  // train split; val is made once
  double val_fraction = 0.01;
  uint64_t seed = 12345;
  NspRule nsp = NspRule::kBalanced;
  ProgressMode progress = ProgressMode::kAuto;
};

struct BertPrepareSummary {
  size_t files = 0, documents = 0, val_documents = 0, sentences = 0;
  size_t excluded = 0;  // documents held out by exclude_docs
  uint64_t bytes = 0;
  size_t train_instances = 0, val_instances = 0;
  size_t train_not_next = 0, val_not_next = 0;
  uint64_t train_tokens = 0, val_tokens = 0;  // [CLS]/[SEP] included
  int vocab_size = 0;
  bool vocab_trained = false;
  double vocab_seconds = 0;
  std::string train_path, val_path, vocab_path;
  double seconds = 0;
};

// One document's instances, exactly the loop of create_pretraining_data.py's
// create_instances_from_document (documents: sentences of token ids). `rng_state` is
// the counter of the preparation's RNG, advanced by every draw.
void create_bert_instances(const std::vector<std::vector<std::vector<uint16_t>>>& documents, size_t doc_index,
                           int max_seq_len, double short_seq_prob, NspRule nsp, const BertSpecialIds& special,
                           uint64_t seed, uint64_t& rng_state, std::vector<BertInstance>& out);

BertPrepareSummary prepare_bert(const BertPrepareOptions& opt);
std::string describe(const BertPrepareSummary& s);

}  // namespace mptrain
