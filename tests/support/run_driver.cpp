#include "tests/support/run_driver.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace qconv::test {

driver_result run_driver(const std::vector<std::string> &args) { return run_driver(args, {}); }

driver_result run_driver(const std::vector<std::string> &args,
                         const std::vector<std::pair<std::string, std::string>> &env) {
    driver_result r;
    char err_path[] = "/tmp/qconv_driver_stderr_XXXXXX";
    const int fd = mkstemp(err_path);
    if (fd < 0) return r;
    close(fd);
    std::string cmd;
    for (const auto &[name, value] : env) cmd += name + "='" + value + "' ";
    cmd += QCONV_DRIVER;
    for (const auto &a : args) cmd += " '" + a + "'";
    cmd += " 2>" + std::string(err_path);
    if (FILE *p = popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
        const int status = pclose(p);
        r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::ifstream e(err_path);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    std::remove(err_path);
    return r;
}

} // namespace qconv::test
