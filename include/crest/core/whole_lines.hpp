// An output stream that hands another one whole lines. Under mpirun the ranks' output shares
// one pipe, and std::cerr writes at every `<<`: a message written in pieces could be cut by
// another rank's line (a JSON line of `bench loader` once landed inside a staging report). Text
// is kept until a newline or carriage return (a progress line), or a flush, and then written in
// one piece; what is left is written when the stream is destroyed.
#pragma once
#include <ostream>
#include <streambuf>
#include <string>

namespace crest {

class WholeLines : public std::ostream {
 public:
  explicit WholeLines(std::ostream& target);
  ~WholeLines() override;
  WholeLines(const WholeLines&) = delete;
  WholeLines& operator=(const WholeLines&) = delete;

 private:
  class Buffer : public std::streambuf {
   public:
    explicit Buffer(std::ostream& target) : target_(target) {}
    int sync() override;

   protected:
    int overflow(int c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;

   private:
    std::ostream& target_;
    std::string line_;
  };
  Buffer buffer_;
};

}  // namespace crest
