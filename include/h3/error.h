// The exceptions libh3 throws: h3::Error carries one clear sentence for the user (one per line when several rules
// are broken); h3::Cancelled is thrown when a generation's cancel flag was raised.
#pragma once
#include <stdexcept>
#include <string>

namespace h3 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Thrown when the cancel flag was raised; nothing of the generation is kept.
class Cancelled : public Error {
 public:
  Cancelled() : Error("generation cancelled") {}
};

}  // namespace h3
