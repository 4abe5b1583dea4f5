// The help formatter and train's topics (help_format.hpp).
#include "help_format.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <utility>

namespace ringtrain::cli {
namespace {

constexpr std::size_t kNameColumn = 30;

std::size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0)
    return std::size_t(std::atoi(columns));
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
    return size.ws_col;
  return 100;
}

// `text` in lines of at most `width` characters (a longer word stands alone), each after the
// first indented by `indent` spaces; the text's own line breaks are kept.
std::string wrap(const std::string& text, std::size_t indent, std::size_t width) {
  std::string out, line;
  const auto flush = [&] {
    if (!out.empty()) out += "\n" + std::string(indent, ' ');
    out += line;
    line.clear();
  };
  std::istringstream paragraphs(text);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    std::istringstream words(paragraph);
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > width) flush();
      line += (line.empty() ? "" : " ") + word;
    }
    flush();
  }
  return out;
}

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(kNameColumn); }

  std::string make_usage(const CLI::App* app, std::string /*name*/) const override {
    std::string path = app->get_name();
    for (const CLI::App* parent = app->get_parent(); parent; parent = parent->get_parent())
      path =
          (parent->get_name().empty() ? std::string("ringtrain") : parent->get_name()) + " " + path;
    if (!app->get_parent()) path = "ringtrain";
    return CLI::Formatter::make_usage(app, path);
  }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    std::string name = "  " + make_option_name(opt, is_positional) + make_option_opts(opt);
    const std::string desc = make_option_desc(opt);
    const std::size_t width = std::max<std::size_t>(terminal_width(), kNameColumn + 30);
    if (desc.empty()) return name + "\n";
    name += name.size() >= kNameColumn ? "\n" + std::string(kNameColumn, ' ')
                                       : std::string(kNameColumn - name.size(), ' ');
    return name + wrap(desc, kNameColumn, width - kNameColumn) + "\n";
  }
};

// Each visible option of train under one heading, in the order --help shows the headings.
constexpr std::pair<std::string_view, std::string_view> kTopics[] = {
    {"data", "Data"},
    {"data-memory-limit", "Data"},
    {"validation-fraction", "Data"},
    {"model", "Model"},
    {"mlp-hidden", "Model"},
    {"dropout", "Model"},
    {"conv-algorithm", "Model"},
    {"loss", "Model"},
    {"global-batch", "Optimization"},
    {"steps", "Optimization"},
    {"epochs", "Optimization"},
    {"optimizer", "Optimization"},
    {"lr", "Optimization"},
    {"momentum", "Optimization"},
    {"nesterov", "Optimization"},
    {"weight-decay", "Optimization"},
    {"beta1", "Optimization"},
    {"beta2", "Optimization"},
    {"eps", "Optimization"},
    {"schedule", "Optimization"},
    {"warmup-steps", "Optimization"},
    {"step-size", "Optimization"},
    {"gamma", "Optimization"},
    {"min-lr", "Optimization"},
    {"lr-scaling", "Optimization"},
    {"seed", "Optimization"},
    {"max-nonfinite-steps", "Optimization"},
    {"local-batches", "Parallelism"},
    {"rebalance-every", "Parallelism"},
    {"max-local-batch", "Parallelism"},
    {"reduction", "Parallelism"},
    {"exact-micro-batch", "Parallelism"},
    {"sync-bn", "Parallelism"},
    {"collective", "Parallelism"},
    {"ranks-per-host", "Parallelism"},
    {"wire", "Parallelism"},
    {"zero", "Parallelism"},
    {"replica-check-every", "Parallelism"},
    {"blas-threads", "Performance"},
    {"gemm", "Performance"},
    {"bucket-bytes", "Performance"},
    {"bucket-update", "Performance"},
    {"overlap", "Performance"},
    {"ring-driver", "Performance"},
    {"cost-model", "Performance"},
    {"segments-in-flight", "Performance"},
    {"run-dir", "Evaluation and outputs"},
    {"eval-every", "Evaluation and outputs"},
    {"target", "Evaluation and outputs"},
    {"target-accuracy", "Evaluation and outputs"},
    {"log-every", "Evaluation and outputs"},
    {"no-eval", "Evaluation and outputs"},
    {"quiet", "Evaluation and outputs"},
    {"progress", "Evaluation and outputs"},
    {"trace-steps", "Evaluation and outputs"},
    {"checkpoint-every", "Checkpoints and failures"},
    {"mtbf", "Checkpoints and failures"},
    {"node-mtbf", "Checkpoints and failures"},
    {"keep", "Checkpoints and failures"},
    {"max-failed-saves", "Checkpoints and failures"},
    {"checkpoint-async", "Checkpoints and failures"},
    {"zero-gather", "Checkpoints and failures"},
    {"checkpoint-key", "Checkpoints and failures"},
    {"resume", "Checkpoints and failures"},
    {"watchdog-s", "Checkpoints and failures"},
};

}  // namespace

std::shared_ptr<CLI::Formatter> make_help_formatter() {
  return std::make_shared<HelpFormatter>();
}

std::string train_topic(std::string_view name) {
  for (const auto& [option, topic] : kTopics)
    if (option == name) return std::string(topic);
  return "Other";
}

}  // namespace ringtrain::cli
