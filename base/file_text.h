// Small text files the programs are pointed at by flags: PEM certificates, secrets, tokens.
// Callers word their own errors (they know the flag's name).
#ifndef TPSERVE_BASE_FILE_TEXT_H_
#define TPSERVE_BASE_FILE_TEXT_H_

#include <optional>
#include <string>

namespace tpserve {

// The whole file; nullopt when it cannot be opened.
std::optional<std::string> ReadFileText(const std::string& path);

// The file's first line without trailing whitespace; nullopt when the file cannot be opened or
// is empty.
std::optional<std::string> ReadFirstLine(const std::string& path);

}  // namespace tpserve

#endif  // TPSERVE_BASE_FILE_TEXT_H_
