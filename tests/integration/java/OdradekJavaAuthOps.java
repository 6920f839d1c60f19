import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.AclOperation;

/** KIP-430: what the Java admin reports as authorized operations. Prints one line
 *  per resource: "OPS <what> <sorted operations or null>". Args: bootstrap topic group. */
public class OdradekJavaAuthOps {
    static String show(Set<AclOperation> ops) {
        if (ops == null) return "null";
        List<String> names = new ArrayList<>();
        for (AclOperation op : ops) names.add(op.name());
        Collections.sort(names);
        return String.join(",", names);
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        for (int i = 3; i + 1 < args.length; i += 2) p.put(args[i], args[i + 1]);
        try (Admin admin = Admin.create(p)) {
            TopicDescription t = admin.describeTopics(List.of(args[1]),
                new DescribeTopicsOptions().includeAuthorizedOperations(true))
                .allTopicNames().get().get(args[1]);
            System.out.println("OPS topic " + show(t.authorizedOperations()));
            DescribeClusterResult c = admin.describeCluster(
                new DescribeClusterOptions().includeAuthorizedOperations(true));
            System.out.println("OPS cluster " + show(c.authorizedOperations().get()));
            ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(args[2]),
                new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                .all().get().get(args[2]);
            System.out.println("OPS group " + show(g.authorizedOperations()));
        }
        System.out.println("DONE");
    }
}
