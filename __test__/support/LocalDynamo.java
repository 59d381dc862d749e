// Launcher for Amazon DynamoDB Local that binds to 127.0.0.1 only.
//
// Run as a single-file source program (Java 11+):
//   java -Djava.library.path=<DynamoDBLocal_lib> -cp <DynamoDBLocal.jar>:<lib jars> \
//        LocalDynamo.java <port>
//
// DynamoDB Local's command line has no host option and its embedded Jetty server
// listens on every interface. This launcher builds the server through
// ServerRunner.createServerFromCommandLineArgs, then (before start()) reaches the
// Jetty Server held in DynamoDBProxyServer's private "server" field by reflection
// and calls setHost("127.0.0.1") on every ServerConnector.
//
// Everything is done by reflection, so compiling this file needs no classpath and
// it works with both the 3.x package (software.amazon.dynamodb.services.local)
// and the older 1.x/2.x package (com.amazonaws.services.dynamodbv2.local).
//
// Prints {"port":N,"host":"127.0.0.1"} on stdout once listening. Exits when stdin
// reaches EOF (the parent process went away) or on SIGTERM.

import java.lang.reflect.Field;
import java.lang.reflect.Method;

public class LocalDynamo {
    private static final String HOST = "127.0.0.1";
    private static final String[] RUNNER_CLASSES = {
        "software.amazon.dynamodb.services.local.main.ServerRunner",
        "com.amazonaws.services.dynamodbv2.local.main.ServerRunner",
    };

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: java LocalDynamo.java <port>");
            System.exit(2);
        }
        String port = args[0];

        Class<?> runner = null;
        for (String name : RUNNER_CLASSES) {
            try {
                runner = Class.forName(name);
                break;
            } catch (ClassNotFoundException ignored) {
                // try the next one
            }
        }
        if (runner == null) {
            throw new IllegalStateException("DynamoDB Local ServerRunner not found on the classpath");
        }

        Method create = runner.getMethod("createServerFromCommandLineArgs", String[].class);
        Object proxy = create.invoke(null, (Object) new String[] {
            "-inMemory", "-sharedDb", "-disableTelemetry", "-port", port,
        });
        if (proxy == null) {
            throw new IllegalStateException("createServerFromCommandLineArgs returned null");
        }

        Object jetty = findJettyServer(proxy);
        int bound = 0;
        Object[] connectors = (Object[]) jetty.getClass().getMethod("getConnectors").invoke(jetty);
        for (Object connector : connectors) {
            try {
                Method setHost = connector.getClass().getMethod("setHost", String.class);
                setHost.invoke(connector, HOST);
                bound++;
            } catch (NoSuchMethodException e) {
                throw new IllegalStateException("connector without setHost: " + connector.getClass().getName());
            }
        }
        if (bound == 0) {
            throw new IllegalStateException("no Jetty connectors found to restrict to " + HOST);
        }

        final Object server = proxy;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.getClass().getMethod("stop").invoke(server);
            } catch (Throwable ignored) {
                // exiting anyway
            }
        }));

        // Exit when the parent closes our stdin.
        Thread watchdog = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // discard
                }
            } catch (Throwable ignored) {
                // treat as EOF
            }
            System.exit(0);
        }, "stdin-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        proxy.getClass().getMethod("start").invoke(proxy);

        // start() swallows bind errors (it prints them and stops); verify we are running.
        boolean started = (Boolean) jetty.getClass().getMethod("isStarted").invoke(jetty);
        if (!started) {
            System.err.println("DynamoDB Local failed to start on " + HOST + ":" + port);
            System.exit(1);
        }

        System.out.println("{\"port\":" + Integer.parseInt(port) + ",\"host\":\"" + HOST + "\"}");
        System.out.flush();

        proxy.getClass().getMethod("join").invoke(proxy);
    }

    private static Object findJettyServer(Object proxy) throws Exception {
        for (Class<?> c = proxy.getClass(); c != null; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (f.getType().getName().equals("org.eclipse.jetty.server.Server")) {
                    f.setAccessible(true);
                    Object value = f.get(proxy);
                    if (value != null) {
                        return value;
                    }
                }
            }
        }
        throw new IllegalStateException("no org.eclipse.jetty.server.Server field in " + proxy.getClass().getName());
    }
}
