// A JVM taking the faults it takes on purpose, after large copies made
// through the C library's memcpy (a JNI call): implicit null checks
// (compiled code loads through null and the SIGSEGV handler throws),
// stack overflow (the guard pages), a truncated mapped file (SIGBUS, an
// InternalError), and a crash its handler does not own (hs_err, abort).
// Each prints OUTCOME lines; under the preload they must be the same.
import java.io.RandomAccessFile;
import java.lang.reflect.Field;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

public class Jsig {
    static native void bigCopy();

    static int depth;
    static void recurse() { depth++; recurse(); }

    static int hash(Object o) { return o.hashCode(); }

    public static void main(String[] a) throws Exception {
        System.load(a[0]);
        bigCopy();
        System.out.println("OUTCOME copied");
        switch (a[1]) {
            case "npe": {
                // Compiled, `hash` checks for null by loading through it.
                Object[] objs = {new Object(), null};
                int npes = 0;
                for (int i = 0; i < 200_000; i++) {
                    try {
                        hash(objs[i % 1000 == 999 ? 1 : 0]);
                    } catch (NullPointerException e) {
                        npes++;
                    }
                }
                bigCopy();
                System.out.println("OUTCOME null pointers caught " + npes);
                break;
            }
            case "soe":
                for (int i = 0; i < 3; i++) {
                    try {
                        recurse();
                    } catch (StackOverflowError e) {
                        System.out.println("OUTCOME stack overflow caught " + i);
                    }
                    bigCopy();
                }
                break;
            case "truncated": {
                java.io.File f = java.io.File.createTempFile("jsig", ".bin");
                f.deleteOnExit();
                try (RandomAccessFile r = new RandomAccessFile(f, "rw")) {
                    r.setLength(8192);
                    MappedByteBuffer m = r.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, 8192);
                    r.setLength(4096);
                    try {
                        m.get(6000);
                        System.out.println("OUTCOME read past the end");
                    } catch (InternalError e) {
                        System.out.println("OUTCOME truncated mapping: InternalError");
                    }
                }
                bigCopy();
                break;
            }
            case "crash": {
                Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                sun.misc.Unsafe u = (sun.misc.Unsafe) f.get(null);
                u.putLong(8L, 42L);
                System.out.println("OUTCOME survived a write to page 0");
                break;
            }
            default:
                System.exit(2);
        }
    }
}
