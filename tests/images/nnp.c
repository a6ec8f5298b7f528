/* nnp: the e2e suite's nonewprivs command for the AllowPrivilegeEscalation
 * tests. It is installed setuid root in its image and prints the effective
 * uid it runs with: 0 when the setuid bit took effect, the caller's uid when
 * no_new_privs (allowPrivilegeEscalation: false) kept it from taking effect. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("Effective uid: %d\n", (int)geteuid());
    return 0;
}
