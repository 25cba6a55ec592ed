/*
 * bcryptprimitives.dll for wine 8 (Debian 12), which lacks it: Go >= 1.22 Windows programs load it
 * from system32 at start-up for ProcessPrng and panic without it. Wine 9 ships the same function over
 * the same call (dlls/bcryptprimitives). Built by hack/wine.sh with mingw-w64; used only by tests.
 */
#include <windows.h>

/* RtlGenRandom: advapi32's exported name. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* ProcessPrng fills data with len random bytes; like Windows' it always returns TRUE (a failure of
 * the generator underneath is fatal, not reported). RtlGenRandom takes a ULONG length, so larger
 * requests go in pieces. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n))
            ExitProcess(0xC0000001); /* STATUS_UNSUCCESSFUL */
        data += n;
        len -= n;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance; (void)reason; (void)reserved;
    return TRUE;
}
