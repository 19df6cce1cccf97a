// The suite builds and links against the library.
#include <gtest/gtest.h>

#include "backend/device.h"

TEST(Smoke, DeviceQueryDoesNotThrow) { EXPECT_GE(mptrain::cuda_device_count(), 0); }
