#include "core/session.h"
#include "core/executor.h"
namespace strata {
Session::~Session() = default;
}
