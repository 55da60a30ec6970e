/* volk's implementation, compiled into the provider (libvulkan-volk-dev ships it as a
 * header-style source). It dlopens libvulkan.so.1 in volkInitialize(). */
#include <volk.c>
