#include "core/executor.h"
namespace strata {
Executor::~Executor() = default;
}
