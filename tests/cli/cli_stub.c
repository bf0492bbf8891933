/* cli_stub.c: a stand-in for libvramwatch.so in the run tests: preloading it must make this symbol visible. */
int vwcli_stub_marker(void);

int vwcli_stub_marker(void)
{
    return 1;
}
