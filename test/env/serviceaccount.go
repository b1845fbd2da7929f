package env

import (
	"context"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountKubeconfig writes, in dir, a kubeconfig that acts as
// ServiceAccount name of Argo CD's namespace, with a token the API server
// issues for an hour, as a pod has one. It returns the file's path.
func (e *Env) ServiceAccountKubeconfig(ctx context.Context, name, dir string) (string, error) {
	admin, err := e.RESTConfig(Admin.Name)
	if err != nil {
		return "", err
	}
	expiry := int64(3600)
	token, err := kubernetes.NewForConfigOrDie(admin).CoreV1().ServiceAccounts(e.ArgoNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["test"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	kubeconfig.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kubeconfig.CurrentContext = "test"
	path := filepath.Join(dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kubeconfig, path)
}
