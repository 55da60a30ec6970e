// strata audit: fixtures are real ELF files built at test time with the system C compiler,
// packed into folders and tar archives, so every check runs against what a linker produces.
#include "audit/audit.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audit/elf_reader.h"
#include "audit/policy.h"

namespace strata::audit {
namespace {
namespace fs = std::filesystem;

std::string PolicyPath(const std::string& name) {
  return std::string(STRATA_SOURCE_DIR) + "/packaging/policies/" + name + ".json";
}

bool HasFinding(const std::vector<Finding>& list, const std::string& kind, const std::string& needle = "") {
  return std::any_of(list.begin(), list.end(), [&](const Finding& f) {
    return f.kind == kind &&
           (needle.empty() || f.message.find(needle) != std::string::npos || f.file.find(needle) != std::string::npos);
  });
}

std::string Dump(const AuditReport& r) { return FormatText(r); }

const ClosureEntry* FindClosure(const AuditReport& r, const std::string& file_suffix, const std::string& needed) {
  for (const auto& f : r.files) {
    if (f.path.size() < file_suffix.size() ||
        f.path.compare(f.path.size() - file_suffix.size(), file_suffix.size(), file_suffix) != 0) {
      continue;
    }
    for (const auto& c : f.closure) {
      if (c.needed == needed) return &c;
    }
  }
  return nullptr;
}

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "strata_audit_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "fake");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path P(const std::string& rel) const { return dir_ / rel; }

  // Compiles `code` into the shared library `out` (relative to the temp dir). `extra` is appended
  // verbatim to the cc command line: -Wl,-soname,..., -Wl,-rpath,..., libraries to link.
  void BuildLib(const std::string& out, const std::string& code, const std::string& extra = "") {
    const fs::path src = P(out + ".c");
    fs::create_directories(src.parent_path());
    std::ofstream(src) << code << "\n";
    const std::string cmd = "cd '" + dir_.string() + "' && cc -shared -fPIC -Wl,--no-as-needed -o '" + out + "' '" +
                            src.string() + "' " + extra + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    fs::remove(src);
  }
  // A stand-in accelerator runtime with the real soname, kept outside the package.
  std::string FakeRuntime(const std::string& soname) {
    BuildLib("fake/" + soname, "int fake_runtime_symbol(void) { return 0; }", "-Wl,-soname," + soname);
    return "fake/" + soname;
  }
  void Sh(const std::string& cmd) {
    ASSERT_EQ(std::system(("cd '" + dir_.string() + "' && " + cmd).c_str()), 0) << cmd;
  }

  Result<AuditReport> Audit(std::vector<std::string> inputs, const std::string& policy = "") {
    AuditOptions o;
    o.inputs = std::move(inputs);
    o.search_system = false;  // independent of what this machine has installed
    if (!policy.empty()) o.policy_path = PolicyPath(policy);
    return RunAudit(o);
  }

  // lib/libstrata.so.0, clean: $ORIGIN RUNPATH, only strata_* exported.
  void BuildCleanCore(const std::string& root) {
    BuildLib(root + "/lib/libstrata.so.0", "int strata_version(void) { return 1; }",
             "-Wl,-soname,libstrata.so.0 '-Wl,-rpath,$ORIGIN'");
  }
  void BuildProvider(const std::string& path, const std::string& extra = "") {
    BuildLib(path, "int strata_provider_probe(void) { return 1; }\nint strata_provider_init(void) { return 0; }",
             extra);
  }

  fs::path dir_;
};

// ---- ELF reader ----

TEST(AuditElfReader, ReadsGlibcMaxVersionFromSystemBinary) {
  std::ifstream in("/bin/ls", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto info = ParseElf(bytes.data(), bytes.size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->kind, ElfKind::kExecutable);
  ASSERT_TRUE(info->max_versions.count("GLIBC"));
  EXPECT_GE(CompareVersions(info->max_versions.at("GLIBC"), "2.2.5"), 0);
  EXPECT_LE(CompareVersions(info->max_versions.at("GLIBC"), "2.36"), 0) << "built on Debian 12 (glibc 2.36)";
  EXPECT_FALSE(std::find(info->needed.begin(), info->needed.end(), "libc.so.6") == info->needed.end());
}

TEST(AuditElfReader, ReadsGlibcxxVersionFromTheTestBinary) {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto info = ParseElf(bytes.data(), bytes.size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_TRUE(info->max_versions.count("GLIBCXX"));
  EXPECT_EQ(info->max_versions.at("GLIBCXX").rfind("3.4.", 0), 0u);
  EXPECT_FALSE(info->max_versions.count("GLIBC_PRIVATE"));
}

TEST(AuditElfReader, ComparesVersionsNumerically) {
  EXPECT_LT(CompareVersions("3.4.9", "3.4.30"), 0);
  EXPECT_GT(CompareVersions("2.36", "2.4"), 0);
  EXPECT_EQ(CompareVersions("2.36", "2.36"), 0);
  EXPECT_LT(CompareVersions("2.36", "2.36.1"), 0);
}

TEST(AuditElfReader, RejectsNonElfBytes) {
  std::string text = "#!/bin/sh\necho hi\n";
  auto info = ParseElf(text.data(), text.size());
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("not an ELF"), std::string::npos);
}

TEST(AuditDenyList, MatchesBySonamePrefix) {
  Policy p;
  EXPECT_EQ(MatchDeny("libcudart.so.13", p).value_or(""), "libcudart.so");
  EXPECT_EQ(MatchDeny("libcuda.so.1", p).value_or(""), "libcuda.so");
  EXPECT_EQ(MatchDeny("libcudnn_ops_infer.so.8", p).value_or(""), "libcudnn");
  EXPECT_EQ(MatchDeny("libOpenCL.so.1", p).value_or(""), "libOpenCL.so");
  EXPECT_EQ(MatchDeny("librocm_smi64.so.5", p).value_or(""), "librocm");
  EXPECT_FALSE(MatchDeny("libtbb.so.12", p).has_value());
  EXPECT_FALSE(MatchDeny("libc.so.6", p).has_value());
  EXPECT_FALSE(MatchDeny("libcudaxyz.so", p).has_value());
}

// ---- fixtures: reading and closure ----

TEST_F(AuditTest, ReadsNeededSonameRunpathAndExports) {
  BuildLib("pkg/lib/libbar.so", "int bar(void) { return 2; }", "-Wl,-soname,libbar.so");
  BuildLib("pkg/lib/libfoo.so",
           "int bar(void);\nint foo(void) { return bar(); }\nstatic int hidden(void) { return 0; }",
           "-Wl,-soname,libfoo.so.1 -Wl,--enable-new-dtags '-Wl,-rpath,$ORIGIN:$ORIGIN/../x' pkg/lib/libbar.so");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto it =
      std::find_if(r->files.begin(), r->files.end(), [](const FileReport& f) { return f.path == "lib/libfoo.so"; });
  ASSERT_NE(it, r->files.end()) << Dump(*r);
  EXPECT_EQ(it->elf.soname, "libfoo.so.1");
  EXPECT_EQ(it->elf.runpath, (std::vector<std::string>{"$ORIGIN", "$ORIGIN/../x"}));
  EXPECT_TRUE(it->elf.rpath.empty());
  EXPECT_NE(std::find(it->elf.needed.begin(), it->elf.needed.end(), "libbar.so"), it->elf.needed.end());
  EXPECT_NE(std::find(it->elf.exports.begin(), it->elf.exports.end(), "foo"), it->elf.exports.end());
  EXPECT_EQ(std::find(it->elf.exports.begin(), it->elf.exports.end(), "bar"), it->elf.exports.end());
  EXPECT_EQ(std::find(it->elf.exports.begin(), it->elf.exports.end(), "hidden"), it->elf.exports.end());
  const ClosureEntry* c = FindClosure(*r, "lib/libfoo.so", "libbar.so");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->resolution, "package");
  EXPECT_EQ(c->path, "lib/libbar.so");
}

TEST_F(AuditTest, RunpathAppliesToDirectDependenciesOnly) {
  // libA (RUNPATH $ORIGIN/sub) -> libB (no paths) -> libC; B and C live in sub/.
  BuildLib("pkg/lib/sub/libC.so", "int c(void) { return 3; }", "-Wl,-soname,libC.so");
  BuildLib("pkg/lib/sub/libB.so", "int c(void);\nint b(void) { return c(); }",
           "-Wl,-soname,libB.so pkg/lib/sub/libC.so");
  BuildLib("pkg/lib/libA.so", "int b(void);\nint a(void) { return b(); }",
           "-Wl,-soname,libA.so -Wl,--enable-new-dtags '-Wl,-rpath,$ORIGIN/sub' -Wl,-rpath-link,pkg/lib/sub "
           "pkg/lib/sub/libB.so");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ClosureEntry* b = FindClosure(*r, "lib/libA.so", "libB.so");
  ASSERT_NE(b, nullptr) << Dump(*r);
  EXPECT_EQ(b->resolution, "package");
  EXPECT_EQ(b->path, "lib/sub/libB.so");
  // libA's RUNPATH does not reach libB's own dependency: the loader would not find libC there.
  const ClosureEntry* c = FindClosure(*r, "lib/libA.so", "libC.so");
  ASSERT_NE(c, nullptr) << Dump(*r);
  EXPECT_EQ(c->resolution, "package-by-name");
  EXPECT_EQ(c->depth, 2);
  EXPECT_TRUE(HasFinding(r->warnings, "not-on-search-path", "libC.so")) << Dump(*r);
}

TEST_F(AuditTest, RpathIsInheritedByIndirectDependencies) {
  BuildLib("pkg/lib/sub/libC.so", "int c(void) { return 3; }", "-Wl,-soname,libC.so");
  BuildLib("pkg/lib/sub/libB.so", "int c(void);\nint b(void) { return c(); }",
           "-Wl,-soname,libB.so pkg/lib/sub/libC.so");
  BuildLib("pkg/lib/libA.so", "int b(void);\nint a(void) { return b(); }",
           "-Wl,-soname,libA.so -Wl,--disable-new-dtags '-Wl,-rpath,$ORIGIN/sub' -Wl,-rpath-link,pkg/lib/sub "
           "pkg/lib/sub/libB.so");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto a = std::find_if(r->files.begin(), r->files.end(), [](const FileReport& f) { return f.path == "lib/libA.so"; });
  ASSERT_NE(a, r->files.end());
  EXPECT_TRUE(a->elf.runpath.empty());
  EXPECT_EQ(a->elf.rpath, std::vector<std::string>{"$ORIGIN/sub"});
  bool found = false;
  for (const auto& f : r->files) {
    if (f.path != "lib/libA.so") continue;
    for (const auto& c : f.closure) {
      if (c.needed == "libC.so") {
        found = true;
        EXPECT_EQ(c.resolution, "package");
        EXPECT_EQ(c.depth, 2);
        EXPECT_EQ(c.path, "lib/sub/libC.so");
      }
    }
  }
  EXPECT_TRUE(found) << Dump(*r);
}

TEST_F(AuditTest, DenyListViolationNamesTheChain) {
  const std::string cudart = FakeRuntime("libcudart.so.13");
  BuildLib("pkg/lib/libfoo.so", "int fake_runtime_symbol(void);\nint foo(void) { return fake_runtime_symbol(); }",
           "-Wl,-soname,libfoo.so '-Wl,-rpath,$ORIGIN' " + cudart);
  BuildLib("pkg/lib/libstrata.so.0", "int foo(void);\nint strata_run(void) { return foo(); }",
           "-Wl,-soname,libstrata.so.0 '-Wl,-rpath,$ORIGIN' -Wl,-rpath-link,fake pkg/lib/libfoo.so");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->passed());
  EXPECT_TRUE(HasFinding(r->violations, "deny-list", "lib/libstrata.so.0 -> libfoo.so -> libcudart.so.13")) << Dump(*r);
  EXPECT_TRUE(HasFinding(r->violations, "deny-list", "lib/libfoo.so -> libcudart.so.13")) << Dump(*r);
}

TEST_F(AuditTest, DenyListCatchesOpenCLAndSkipsProviders) {
  const std::string ocl = FakeRuntime("libOpenCL.so.1");
  const std::string cudart = FakeRuntime("libcudart.so.13");
  BuildLib("pkg/libdnnl-like.so.2", "int fake_runtime_symbol(void);\nint d(void) { return fake_runtime_symbol(); }",
           "-Wl,-soname,libdnnl-like.so.2 " + ocl);
  BuildProvider("pkg/libstrata-provider-cuda.so", cudart);
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "deny-list", "libdnnl-like.so.2 -> libOpenCL.so.1")) << Dump(*r);
  EXPECT_FALSE(HasFinding(r->violations, "deny-list", "libcudart")) << Dump(*r);
  auto p = std::find_if(r->files.begin(), r->files.end(),
                        [](const FileReport& f) { return f.path == "libstrata-provider-cuda.so"; });
  ASSERT_NE(p, r->files.end());
  EXPECT_EQ(p->role, "provider");
}

TEST_F(AuditTest, CorePrefixLimitsWhatCountsAsCore) {
  const std::string ocl = FakeRuntime("libOpenCL.so.1");
  BuildLib("pkg/tools/libocl-helper.so",
           "int fake_runtime_symbol(void);\nint h(void) { return fake_runtime_symbol(); }",
           "-Wl,-soname,libocl-helper.so " + ocl);
  AuditOptions o;
  o.inputs = {P("pkg").string()};
  o.search_system = false;
  o.core_prefixes = {"lib/"};
  auto r = RunAudit(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(HasFinding(r->violations, "deny-list")) << Dump(*r);
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].role, "other");
}

TEST_F(AuditTest, AbsoluteRunpathIsABuildPathLeak) {
  BuildLib("pkg/lib/libleak.so", "int leak(void) { return 0; }",
           "-Wl,-soname,libleak.so '-Wl,-rpath,/home/builder/strata/build/lib:$ORIGIN'");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "runpath-leak", "/home/builder/strata/build/lib")) << Dump(*r);
  EXPECT_FALSE(HasFinding(r->violations, "runpath-leak", "'$ORIGIN'")) << Dump(*r);
  // Named directly (not a package) it is only a warning.
  auto direct = Audit({P("pkg/lib/libleak.so").string()});
  ASSERT_TRUE(direct.ok());
  EXPECT_TRUE(direct->passed()) << Dump(*direct);
  EXPECT_TRUE(HasFinding(direct->warnings, "runpath-leak"));
}

TEST_F(AuditTest, CoreLibraryMayExportOnlyStrataPrefix) {
  BuildLib("pkg/lib/libstrata.so.0", "int strata_ok(void) { return 0; }\nint leaked_helper(void) { return 1; }",
           "-Wl,-soname,libstrata.so.0");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "export-prefix", "leaked_helper")) << Dump(*r);
  EXPECT_FALSE(HasFinding(r->violations, "export-prefix", "strata_ok")) << Dump(*r);
}

TEST_F(AuditTest, ProviderMustExportExactlyProbeAndInit) {
  BuildLib("pkg/libstrata-provider-extra.so",
           "int strata_provider_probe(void) { return 1; }\nint strata_provider_init(void) { return 0; }\n"
           "int helper(void) { return 2; }");
  BuildLib("pkg/libstrata-provider-noinit.so", "int strata_provider_probe(void) { return 1; }");
  BuildProvider("pkg/libstrata-provider-good.so");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "export-prefix", "helper")) << Dump(*r);
  EXPECT_TRUE(HasFinding(r->violations, "provider-exports", "strata_provider_init")) << Dump(*r);
  for (const auto& v : r->violations) EXPECT_NE(v.file, "libstrata-provider-good.so") << v.message;
}

TEST_F(AuditTest, ExecutablesAreNotCheckedForExports) {
  fs::create_directories(P("pkg/bin"));
  Sh("printf 'int main(void) { return 0; }\\nint exported_thing(void) { return 1; }\\n' > m.c && "
     "cc -rdynamic -o pkg/bin/libstrata.so-tool m.c");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].elf.kind, ElfKind::kExecutable);
  EXPECT_FALSE(HasFinding(r->violations, "export-prefix")) << Dump(*r);
}

// ---- bad input ----

TEST_F(AuditTest, TruncatedElfNamedDirectlyIsAnError) {
  BuildLib("whole.so", "int f(void) { return 0; }");
  for (size_t keep : {size_t{10}, size_t{100}, fs::file_size(P("whole.so")) / 2}) {
    fs::copy_file(P("whole.so"), P("cut.so"), fs::copy_options::overwrite_existing);
    fs::resize_file(P("cut.so"), keep);
    auto r = Audit({P("cut.so").string()});
    ASSERT_FALSE(r.ok()) << "kept " << keep << " bytes";
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  }
}

TEST_F(AuditTest, TruncatedElfInFolderIsAViolation) {
  BuildLib("pkg/lib/whole.so", "int f(void) { return 0; }");
  fs::copy_file(P("pkg/lib/whole.so"), P("pkg/lib/cut.so"));
  fs::resize_file(P("pkg/lib/cut.so"), fs::file_size(P("pkg/lib/cut.so")) / 2);
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "malformed-elf", "lib/cut.so")) << Dump(*r);
  EXPECT_EQ(r->files.size(), 1u);
}

TEST_F(AuditTest, NonElfFileNamedDirectlyIsAnError) {
  std::ofstream(P("notes.txt")) << "hello";
  auto r = Audit({P("notes.txt").string()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an ELF file"), std::string::npos);
}

TEST_F(AuditTest, NonElfFileInFolderIsSkippedWithANote) {
  fs::create_directories(P("pkg/include"));
  std::ofstream(P("pkg/include/strata.h")) << "#pragma once\n";
  BuildCleanCore("pkg");
  auto r = Audit({P("pkg").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->passed()) << Dump(*r);
  EXPECT_TRUE(HasFinding(r->notes, "non-elf", "include/strata.h"));
}

TEST_F(AuditTest, MissingFileIsNotFound) {
  auto r = Audit({P("does-not-exist.so").string()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("does-not-exist.so"), std::string::npos);
}

// Writes a tar.gz member by member, so tests can produce entries `tar` refuses to create.
struct TarMember {
  std::string name;
  std::string data;     // regular file contents
  std::string symlink;  // non-empty: a symlink to this target
};
void WriteTarGz(const fs::path& out, const std::vector<TarMember>& members) {
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, out.c_str()), ARCHIVE_OK);
  for (const auto& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_perm(e, 0755);
    if (!m.symlink.empty()) {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, m.symlink.c_str());
      archive_entry_set_size(e, 0);
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
    }
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    if (m.symlink.empty() && !m.data.empty()) archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(AuditTest, ArchiveSymlinkLoopIsReportedNotFollowedForever) {
  BuildCleanCore("stage");
  WriteTarGz(P("loop.tar.gz"), {{"lib/libstrata.so.0", ReadAll(P("stage/lib/libstrata.so.0")), ""},
                                {"lib/a.so", "", "b.so"},
                                {"lib/b.so", "", "a.so"},
                                {"lib/self", "", "self/x"}});
  auto r = Audit({P("loop.tar.gz").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "symlink-loop", "lib/a.so")) << Dump(*r);
  EXPECT_TRUE(HasFinding(r->violations, "symlink-loop", "lib/self")) << Dump(*r);
}

TEST_F(AuditTest, ArchiveMemberWithDotDotIsRejectedAndNeverExtracted) {
  BuildCleanCore("stage");
  const fs::path outside = dir_.parent_path() / "strata_audit_escape.so";
  fs::remove(outside);
  WriteTarGz(P("evil.tar.gz"), {{"lib/libstrata.so.0", ReadAll(P("stage/lib/libstrata.so.0")), ""},
                                {"../strata_audit_escape.so", ReadAll(P("stage/lib/libstrata.so.0")), ""},
                                {"lib/../../x.so", "data", ""}});
  auto r = Audit({P("evil.tar.gz").string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "unsafe-archive-member", "..")) << Dump(*r);
  EXPECT_EQ(std::count_if(r->violations.begin(), r->violations.end(),
                          [](const Finding& f) { return f.kind == "unsafe-archive-member"; }),
            2);
  EXPECT_FALSE(fs::exists(outside));
  EXPECT_EQ(r->files.size(), 1u);
}

TEST_F(AuditTest, CorruptArchiveIsAnIOError) {
  BuildCleanCore("stage");
  Sh("tar czf good.tar.gz -C stage lib && head -c 300 good.tar.gz > bad.tar.gz");
  auto r = Audit({P("bad.tar.gz").string()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("bad.tar.gz"), std::string::npos);
}

// ---- policies on tar.gz archives ----

TEST_F(AuditTest, CpuPolicyPassesCleanArchiveAndFailsWhenAProviderIsAdded) {
  BuildCleanCore("stage/strata-0.1.0");
  Sh("tar czf cpu.tar.gz -C stage strata-0.1.0");
  auto clean = Audit({P("cpu.tar.gz").string()}, "cpu");
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE(clean->passed()) << Dump(*clean);
  EXPECT_EQ(clean->policy_name, "cpu");

  BuildProvider("stage/strata-0.1.0/lib/strata/providers/libstrata-provider-vulkan.so");
  Sh("tar czf cpu2.tar.gz -C stage strata-0.1.0");
  auto dirty = Audit({P("cpu2.tar.gz").string()}, "cpu");
  ASSERT_TRUE(dirty.ok()) << dirty.status().ToString();
  EXPECT_FALSE(dirty->passed());
  EXPECT_TRUE(HasFinding(dirty->violations, "forbidden-file", "libstrata-provider-vulkan.so")) << Dump(*dirty);
}

TEST_F(AuditTest, CpuPolicyRequiresSelfContainedArchive) {
  BuildLib("fake/libprotobuf-fake.so.32", "int pb(void) { return 0; }", "-Wl,-soname,libprotobuf-fake.so.32");
  BuildLib("stage/lib/libstrata.so.0", "int pb(void);\nint strata_x(void) { return pb(); }",
           "-Wl,-soname,libstrata.so.0 '-Wl,-rpath,$ORIGIN' fake/libprotobuf-fake.so.32");
  Sh("tar czf pkg.tgz -C stage lib");
  auto r = Audit({P("pkg.tgz").string()}, "cpu");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "unbundled-dependency", "libprotobuf-fake.so.32")) << Dump(*r);
}

TEST_F(AuditTest, CudaPolicyRequiresProviderThatNeedsCudart) {
  const std::string cudart = FakeRuntime("libcudart.so.13");
  BuildCleanCore("stage");
  BuildProvider("stage/lib/strata/providers/libstrata-provider-cuda.so", cudart);
  Sh("tar czf good.tar.gz -C stage lib");
  auto good = Audit({P("good.tar.gz").string()}, "cuda");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(good->passed()) << Dump(*good);

  // False green: a "CUDA" provider built without CUDA.
  BuildProvider("stage/lib/strata/providers/libstrata-provider-cuda.so");
  Sh("tar czf bad.tar.gz -C stage lib");
  auto bad = Audit({P("bad.tar.gz").string()}, "cuda");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_FALSE(bad->passed());
  EXPECT_TRUE(HasFinding(bad->violations, "required-needed", "libcudart.so")) << Dump(*bad);

  // No provider at all.
  fs::remove(P("stage/lib/strata/providers/libstrata-provider-cuda.so"));
  Sh("tar czf none.tar.gz -C stage lib");
  auto none = Audit({P("none.tar.gz").string()}, "cuda");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(HasFinding(none->violations, "missing-required-file", "libstrata-provider-cuda")) << Dump(*none);
}

TEST_F(AuditTest, GpuPolicyForbidsVulkanProviderLinkingLibvulkan) {
  const std::string vk = FakeRuntime("libvulkan.so.1");
  BuildCleanCore("stage");
  BuildProvider("stage/lib/strata/providers/libstrata-provider-vulkan.so");
  Sh("tar czf good.tar.gz -C stage lib");
  auto good = Audit({P("good.tar.gz").string()}, "gpu");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(good->passed()) << Dump(*good);

  BuildProvider("stage/lib/strata/providers/libstrata-provider-vulkan.so", vk);
  Sh("tar czf bad.tar.gz -C stage lib");
  auto bad = Audit({P("bad.tar.gz").string()}, "gpu");
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(HasFinding(bad->violations, "forbidden-needed", "libvulkan.so.1")) << Dump(*bad);
}

TEST_F(AuditTest, PolicyCapsTheGlibcVersion) {
  BuildLib("pkg/lib/libstrata.so.0", "#include <stdio.h>\nint strata_hello(void) { return puts(\"hi\"); }",
           "-Wl,-soname,libstrata.so.0");
  auto policy = ParsePolicy(R"({"name": "old-glibc", "max_versions": {"GLIBC": "2.0"}})", "inline");
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  AuditOptions o;
  o.inputs = {P("pkg").string()};
  o.policy = *policy;
  auto r = RunAudit(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(HasFinding(r->violations, "symbol-version", "GLIBC_2.0")) << Dump(*r);
}

TEST(AuditPolicy, ShippedPoliciesLoad) {
  for (const char* name : {"cpu", "gpu", "cuda"}) {
    auto p = LoadPolicy(PolicyPath(name));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->name, name);
    EXPECT_TRUE(p->self_contained);
    EXPECT_EQ(p->max_versions.at("GLIBC"), "2.36");
  }
}

TEST(AuditPolicy, RejectsUnknownKeysAndWrongTypes) {
  auto typo = ParsePolicy(R"({"name": "x", "self_contaned": true})", "p.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("self_contaned"), std::string::npos);
  auto type = ParsePolicy(R"({"name": "x", "forbid_files": "lib/*"})", "p.json");
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("forbid_files"), std::string::npos);
  auto version = ParsePolicy(R"({"name": "x", "max_versions": {"GLIBC": "new"}})", "p.json");
  ASSERT_FALSE(version.ok());
  auto json = ParsePolicy("{not json", "p.json");
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find("p.json"), std::string::npos);
}

TEST(AuditPolicy, GlobsMatchUnderATopLevelFolder) {
  EXPECT_TRUE(GlobMatchesPath("lib/libstrata.so*", "lib/libstrata.so.0"));
  EXPECT_TRUE(GlobMatchesPath("lib/libstrata.so*", "strata-0.1.0/lib/libstrata.so.0"));
  EXPECT_FALSE(GlobMatchesPath("lib/libstrata.so*", "lib/sub/libstrata.so.0"));
  EXPECT_TRUE(GlobMatchesPath("libstrata-provider-*.so*", "x/lib/strata/providers/libstrata-provider-cuda.so"));
}

// ---- the command ----

TEST_F(AuditTest, CommandExitCodesAndJson) {
  BuildCleanCore("pkg");
  const std::string cudart = FakeRuntime("libcudart.so.13");
  BuildLib("bad/libstrata.so.0", "int fake_runtime_symbol(void);\nint strata_x(void) { return fake_runtime_symbol(); }",
           "-Wl,-soname,libstrata.so.0 " + cudart);
  EXPECT_EQ(RunAuditCommand({}), 2);
  EXPECT_EQ(RunAuditCommand({"--frobnicate", P("pkg").string()}), 2);
  EXPECT_EQ(RunAuditCommand({P("missing").string()}), 2);
  EXPECT_EQ(RunAuditCommand({"--policy", P("missing.json").string(), P("pkg").string()}), 2);
  EXPECT_EQ(RunAuditCommand({"--no-system", P("pkg").string()}), 0);
  EXPECT_EQ(RunAuditCommand({"--no-system", "--json", P("bad").string()}), 1);

  AuditOptions o;
  o.inputs = {P("bad").string()};
  o.search_system = false;
  auto r = RunAudit(o);
  ASSERT_TRUE(r.ok());
  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["result"], "FAIL");
  EXPECT_EQ(j["violation_count"], 1);
  EXPECT_EQ(j["violations"][0]["kind"], "deny-list");
  EXPECT_EQ(j["files"][0]["path"], "libstrata.so.0");
  EXPECT_EQ(j["files"][0]["needed"][0], "libcudart.so.13");
  const std::string text = FormatText(*r);
  EXPECT_NE(text.find("audit: FAIL (1 violation)"), std::string::npos) << text;
  EXPECT_NE(text.find("libstrata.so.0 -> libcudart.so.13"), std::string::npos) << text;
}

}  // namespace
}  // namespace strata::audit
